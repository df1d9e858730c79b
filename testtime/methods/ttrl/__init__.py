"""`ttrl`: test-time reinforcement learning (arXiv 2504.16084) on the unlabeled problems themselves.

The run: evaluate the base model (avg@k at T=0.6 / top-p 0.95, greedy; the base maj@k comes from the same
samples), train with the selection reward (`vote.py`: majority vote on math, execution-based behaviour
classes on code; TRL on one node: `trl_backend.py`; verl on a cluster: `verl/`), then evaluate the trained
model by the same protocol. The method never sees a label: votes are written per problem under
`ProblemResult.ttrl`, and the scorer audits them against the sealed references (label accuracy, reward
accuracy, ground-truth ratio) outside the method. On code, the base model writes each problem's test inputs
once, before training (its eval samples are the candidates shown), and every step runs the policy's
programs on the public examples plus those inputs in the sandbox.

Options (flags or `--method-opt KEY=VALUE`, see `settings.py`): `--preset paper|cpu`, `--steps`, `--n-vote`,
`--n-train`, `--lr`, `--selector`, and every field of `TTRLSettings`. Weights must be local: `--model
hf:<folder|alias>` (or `vllm:<folder>` on a GPU, whose evaluation then runs on vLLM too).
"""

from __future__ import annotations

from typing import Any, ClassVar

from testtime.core.errors import UserError
from testtime.core.records import SamplingParams
from testtime.methods import METHODS, Method, MethodContext
from testtime.methods.online import Learner
from testtime.methods.ttrl.settings import TUNED_ON, TTRLSettings
from testtime.methods.ttrl.trl_backend import require_trl

LOCAL_PROVIDERS = ("hf", "vllm")


@METHODS.register("ttrl", help="test-time RL: vote a pseudo-label, GRPO on agreement (TRL); --preset paper|cpu")
class TTRL(Method):
    name = "ttrl"
    Options = TTRLSettings
    run_flags = frozenset({"n"})  # it samples with its own settings (temperature, eval_temperature, max_response)
    flag_hints: ClassVar[dict[str, str]] = {
        "temperature": "it trains at --method-opt temperature=T and evaluates at --method-opt eval_temperature=T",
        "top_p": "use --method-opt top_p=P (training) or eval_top_p=P (evaluation)",
        "max_tokens": "use --method-opt max_response=N",
    }

    def __init__(self, streaming: bool = False, **options: Any) -> None:
        self.streaming = streaming
        self.options = self.settings = TTRLSettings.from_options(options)
        self.given = set(options)
        self.selector = None
        self.model_spec = ""  # the rollout temperature's default depends on it (*Math* models train at 1.0)
        require_trl()

    def prepare(self, domain: str, bench: str = "") -> None:
        self.options = self.settings = self.settings.for_benchmark(bench, self.given)
        if domain == "text":
            raise UserError(
                "ttrl rewards agreement with a voted answer, and free-form replies have none to vote on "
                "(short answers: --bench-opt domain=math)"
            )
        if self.streaming and domain == "code":
            raise UserError("online ttrl (--stream) runs on math for now; on code each arrival would need its tests")
        super().prepare(domain, bench)

    def describe(self) -> dict[str, Any]:
        backend = "verl" if self.settings.verl_run else "trl"
        return {**super().describe(), "backend": backend, "tuned_on": TUNED_ON[self.settings.preset]}

    def check_model(self, model_spec: str) -> None:
        if model_spec.partition(":")[0] not in LOCAL_PROVIDERS:
            raise UserError("ttrl updates weights: it needs --model hf:<folder|alias> or vllm:<folder>")
        self.model_spec = model_spec

    def effective_n(self, n: int | None) -> int | None:
        return n or self.settings.eval_samples

    def learner(self, ctx: MethodContext) -> Learner:
        """One learner on two schedules: trained once on the whole set (offline, the paper's), or every
        `update_every` arrivals of a stream (online)."""
        from testtime.methods.ttrl.offline import OfflineTTRL
        from testtime.methods.ttrl.online import OnlineTTRL

        return OnlineTTRL(self, ctx) if self.streaming else OfflineTTRL(self, ctx)

    def uses_labels(self) -> bool:
        return self.settings.reward == "oracle"

    def sampling(self, domain: str, base: SamplingParams) -> dict[str, SamplingParams]:
        """Its own settings, not the run's flags: evaluation by the paper's protocol (k samples at the
        evaluation temperature and top-p, and one greedy answer), rollouts at the training temperature."""
        s = self.settings
        sampled = SamplingParams(
            temperature=s.eval_temperature, top_p=s.eval_top_p, max_tokens=s.max_response, seed=base.seed
        )
        greedy = SamplingParams(temperature=0.0, max_tokens=s.max_response, seed=base.seed)
        rollout = SamplingParams(
            temperature=s.train_temperature(self.model_spec), top_p=s.top_p, max_tokens=s.max_response, seed=base.seed
        )
        if self.streaming:  # each arrival answered by a vote among evaluation samples; updates roll out
            return (
                {"solve": sampled, "ttrl_rollout": rollout}
                | ({"ttrl_vote": rollout} if s.n_vote > s.n_train else {})
                | {kind: base for kind in self._selector_calls()}
            )
        plan = {"eval_before": sampled, "ttrl_rollout": rollout, "eval_after": sampled}
        if s.n_vote > s.n_train:
            plan["ttrl_vote"] = rollout
        if s.eval_greedy:
            plan |= {"eval_before_greedy": greedy, "eval_after_greedy": greedy}
        return plan | {kind: base for kind in self._selector_calls()}
