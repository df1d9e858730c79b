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

from typing import Any

from testtime.core.errors import UserError
from testtime.core.records import SamplingParams
from testtime.methods import METHODS, Method, MethodContext
from testtime.methods.learner import Learner
from testtime.methods.plan import Plan, ProblemSet, RunBase, settled
from testtime.methods.ttrl.recipe import TUNED_ON, TTRLSettings
from testtime.methods.ttrl.trl_backend import require_trl

LOCAL_PROVIDERS = ("hf", "vllm")


@METHODS.register("ttrl", help="test-time RL: vote a pseudo-label, GRPO on agreement (TRL); --preset paper|cpu")
class TTRL(Method):
    Options = TTRLSettings
    options: TTRLSettings

    def __init__(self, **options: Any) -> None:
        self.options = TTRLSettings.from_options(options)
        self.given = set(options)
        require_trl()

    @property
    def settings(self) -> TTRLSettings:
        return self.options

    def plan(self, problems: ProblemSet, base: RunBase, stream: bool = False) -> Plan:
        """Its own settings, not the run's sampling flags: evaluation by the paper's protocol (k samples at the
        evaluation temperature and top-p, and one greedy answer), rollouts at the training temperature."""
        if base.model.partition(":")[0] not in LOCAL_PROVIDERS:
            raise UserError("ttrl updates weights: it needs --model hf:<folder|alias> or vllm:<folder>")
        if problems.domain == "text":
            raise UserError(
                "ttrl rewards agreement with a voted answer, and free-form replies have none to vote on "
                "(short answers: --bench-opt domain=math)"
            )
        if stream and problems.domain == "code":
            raise UserError("online ttrl (--stream) runs on math for now; on code each arrival would need its tests")
        s = self.options.for_benchmark(problems.bench, self.given)
        if s.label == "reflect":
            if problems.domain != "math" or s.selector not in (None, "reflect", "majority"):
                raise UserError(
                    "ttrl label=reflect chooses the pseudo-label by a reflection over the math vote's classes: "
                    f"it needs math problems and no other --selector (here {problems.domain}, {s.selector})"
                )
            s = s.model_copy(update={"selector": "reflect"})
        selector = s.build(problems.domain)
        if s.reward == "matrix" and getattr(selector.options, "rank", None) != "matrix":
            raise UserError(
                "ttrl reward=matrix rewards a sample by its score in the code × test matrix: it needs code problems "
                "and --selector-opt rank=matrix"
            )
        sampled = SamplingParams(
            temperature=s.eval_temperature, top_p=s.eval_top_p, max_tokens=s.max_response, seed=base.seed
        )
        greedy = SamplingParams(temperature=0.0, max_tokens=s.max_response, seed=base.seed)
        rollout = SamplingParams(
            temperature=s.train_temperature(base.model), top_p=s.top_p, max_tokens=s.max_response, seed=base.seed
        )
        if base.adaptive is not None and not stream and s.n_vote <= s.n_train:
            raise UserError(
                f"--adaptive skips a settled prompt's vote-only samples; with n_vote {s.n_vote} <= n_train "
                f"{s.n_train} every vote is trained on and nothing can be skipped (raise n_vote, or drop --adaptive)"
            )
        votes = {"ttrl_vote": rollout} if s.n_vote > s.n_train else {}
        if s.knowledge == "trt" and s.use_vllm:
            raise UserError("ttrl knowledge=trt rewrites each rollout prompt; TRL's vLLM rollouts cannot: drop one")
        # knowledge=trt: TRT's reflection on each step's vote, at the evaluation's sampling
        votes |= {"knowledge": sampled} if s.knowledge == "trt" else {}
        sampling: dict[str, SamplingParams]
        if stream:  # each arrival answered by a vote among evaluation samples; updates roll out
            sampling = {"solve": sampled, "ttrl_rollout": rollout, **votes}
        else:
            sampling = {"eval_before": sampled, "ttrl_rollout": rollout, "eval_after": sampled, **votes}
            if s.eval_greedy:
                sampling |= {"eval_before_greedy": greedy, "eval_after_greedy": greedy}
        return Plan.of(
            self,
            sampling,
            base.sampling(),
            stream=stream,
            selector=selector,
            samples=base.n or s.eval_samples,
            uses_labels=s.reward == "oracle",
            ignores={
                "temperature": "it trains at --method-opt temperature=T, evaluates at --method-opt eval_temperature=T",
                "top_p": "use --method-opt top_p=P (training) or eval_top_p=P (evaluation)",
                "max_tokens": "use --method-opt max_response=N",
            },
            options=s,
            # a stream's arrivals are answered by a vote, and training votes skip vote-only samples once settled;
            # offline answers are the paper's avg@k and greedy protocol, never stopped early
            adaptive=base.adaptive,
            backend="verl" if s.verl_run else "trl",
            tuned_on=TUNED_ON[s.preset],
        )

    def learner(self, ctx: MethodContext) -> Learner:
        """One learner on two schedules: trained once on the whole set (offline, the paper's), or every
        `update_every` arrivals of a stream (online)."""
        from testtime.methods.ttrl.offline import OfflineTTRL
        from testtime.methods.ttrl.online import OnlineTTRL

        method = settled(self, ctx.plan)
        return OnlineTTRL(method, ctx) if ctx.plan.stream else OfflineTTRL(method, ctx)
