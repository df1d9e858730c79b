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

from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from testtime.core.errors import UserError
from testtime.core.ledger import CallPurpose
from testtime.core.records import Candidate, Problem, SamplingParams
from testtime.core.results import ProblemResult, TTRLEvaluation, TTRLRecord, TTRLVote, read_steps
from testtime.core.rollout import RolloutEngine, gather_landed
from testtime.methods import METHODS, Method, MethodContext, make_candidates
from testtime.methods.online import Learner
from testtime.methods.ttrl.jobs import train, trained_engine
from testtime.methods.ttrl.settings import TTRLSettings
from testtime.methods.ttrl.trl_backend import require_trl
from testtime.models import resolve_model
from testtime.selectors import SelectionContext

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
        return {**super().describe(), "backend": "trl"}

    def check_model(self, model_spec: str) -> None:
        if model_spec.partition(":")[0] not in LOCAL_PROVIDERS:
            raise UserError("ttrl updates weights: it needs --model hf:<folder|alias> or vllm:<folder>")
        self.model_spec = model_spec

    def effective_n(self, n: int | None) -> int | None:
        return n or self.settings.eval_samples

    def learner(self, ctx: MethodContext) -> Learner:
        from testtime.methods.ttrl.online import OnlineTTRL

        return OnlineTTRL(self, ctx)

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

    async def stream(self, problems: Sequence[Problem], ctx: MethodContext) -> AsyncIterator[ProblemResult]:
        self.check_model(ctx.engine.model_name)
        provider, model = ctx.engine.model_name.partition(":")[0], ctx.engine.model
        if model is None:
            raise UserError("ttrl cannot be replayed from the cache: it trains; use --resume")
        if ctx.workdir is None:
            raise UserError("ttrl needs a run directory for its checkpoints")
        if not problems:
            return
        selector = self.selector_for(problems[0].domain)
        before = await self._evaluate(problems, ctx, ctx.engine, after=False)
        inputs = await self._write_inputs(problems, ctx, before)
        await model.aclose()  # free the base weights before the trainer loads its own copy

        def context(problem: Problem) -> SelectionContext:
            return SelectionContext(seed=ctx.seed, sandbox=ctx.sandbox, inputs=inputs.get(problem.id))

        final = await train(
            ctx,
            model_path=model.path,
            problems=problems,
            settings=self.settings,
            workdir=ctx.workdir,
            model_name=ctx.engine.model_name,
            selector=selector,
            context=context,
            seed=ctx.seed,
        )
        trained = resolve_model(f"{provider}:{final}", max_batch=ctx.engine.concurrency)
        engine = trained_engine(ctx, trained, f"{ctx.engine.model_name}+ttrl")
        try:
            after = await self._evaluate(problems, ctx, engine, after=True)
        finally:
            await trained.aclose()
        votes = _votes_by_problem(ctx.workdir / "ttrl" / "steps.jsonl")
        for problem in problems:
            samples, greedy = after[problem.id]
            base_samples, base_greedy = before[problem.id]
            yield ProblemResult(
                problem_id=problem.id,
                prediction=greedy.answer if greedy else None,
                candidates=samples,
                ttrl=TTRLRecord(
                    before=TTRLEvaluation(
                        answers=tuple(c.answer for c in base_samples),
                        greedy=base_greedy.answer if base_greedy else None,
                    ),
                    greedy_after=greedy.answer if greedy else None,
                    votes=tuple(votes.get(problem.id, [])),
                    test_inputs=tuple(inputs.get(problem.id, ())),
                ),
            )

    async def _write_inputs(
        self,
        problems: Sequence[Problem],
        ctx: MethodContext,
        before: dict[str, tuple[list[Candidate], Candidate | None]],
    ) -> dict[str, list[str]]:
        """What the selector writes ahead (`Selector.inputs_ahead`; code's execution: the base model writes each
        problem's test inputs once, shown its own evaluation samples, and every training step then runs the
        policy's programs on them and on the public examples; nothing for a vote on answers)."""
        selector = self.selector
        if selector is None:
            return {}

        async def one(problem: Problem) -> tuple[str, list[str]]:
            return problem.id, await selector.inputs_ahead(problem, before[problem.id][0], ctx.selection(step=0))

        return dict(await gather_landed(*(one(p) for p in problems)))

    async def _evaluate(
        self, problems: Sequence[Problem], ctx: MethodContext, engine: RolloutEngine, after: bool
    ) -> dict[str, tuple[list[Candidate], Candidate | None]]:
        """The paper's protocol: k samples at the evaluation temperature, and one greedy answer."""
        s = self.settings
        purpose: CallPurpose = "eval_after" if after else "eval_before"
        greedy_purpose: CallPurpose = "eval_after_greedy" if after else "eval_before_greedy"

        async def one(problem: Problem) -> tuple[str, tuple[list[Candidate], Candidate | None]]:
            messages = ctx.prompt(problem)
            k = ctx.n or s.eval_samples
            samples = engine.sample(messages, k, ctx.sampled(purpose), problem_id=problem.id, purpose=purpose)
            if not s.eval_greedy:
                return problem.id, (make_candidates(problem, await samples), None)
            greedy = ctx.sampled(greedy_purpose)
            top = engine.sample(messages, 1, greedy, problem_id=problem.id, purpose=greedy_purpose)
            done, best = await gather_landed(samples, top)
            return problem.id, (make_candidates(problem, done), make_candidates(problem, best)[0])

        return dict(await gather_landed(*(one(p) for p in problems)))


def _votes_by_problem(steps_path: Path) -> dict[str, list[TTRLVote]]:
    """Each problem's votes across training (step, label, kept answers, rewards), for the scorer's audit."""
    by_problem: dict[str, dict[int, TTRLVote]] = {}
    for record in read_steps(steps_path):
        for vote in record.votes:
            # A step replayed after a resume overwrites its earlier record: one vote per problem and step.
            by_problem.setdefault(vote.problem_id, {})[record.step] = vote.model_copy(update={"step": record.step})
    return {pid: [steps[s] for s in sorted(steps)] for pid, steps in by_problem.items()}
