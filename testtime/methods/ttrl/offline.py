"""Offline TTRL, the paper's schedule: the learner (`jobs.TTRLLearner`) trains once on the whole set, then answers.

`prepare` evaluates the base weights on every problem (avg@k at the evaluation temperature and top-p, and one
greedy answer; the base maj@k comes from the same samples), lets the selector write what it needs ahead (code:
each problem's test inputs, written once by the base model shown its own evaluation samples), trains
`steps` steps over the whole set into the run directory's `ttrl/` (a resumed run continues from its last
checkpoint; finished weights are reused) or, trained on verl (`verl_run`), joins that training's records
(`verl/join.py`), and loads the trained weights. Each problem is then answered by the
same protocol on them, with its base evaluation and its votes across training recorded beside (`TTRLRecord`),
which the scorer audits against the sealed references outside the method. A resume that stopped while
answering prepares again (every base sample and the training come back from the cache and `ttrl/final`) and
answers only what is left.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from testtime.core.records import Candidate, Problem
from testtime.core.results import ProblemResult, TTRLEvaluation, TTRLRecord, TTRLStep, TTRLVote, read_steps
from testtime.core.rollout import RolloutEngine, gather_landed
from testtime.methods import make_candidates
from testtime.methods.ttrl.jobs import TTRLLearner
from testtime.methods.ttrl.verl.join import join_recorded
from testtime.selectors import SelectionContext

Evaluation = tuple[list[Candidate], Candidate | None]  # k samples, and the greedy answer when asked for


class OfflineTTRL(TTRLLearner):
    before: dict[str, Evaluation]
    inputs: dict[str, list[str]]
    votes: dict[str, list[TTRLVote]]

    async def prepare(self, problems: Sequence[Problem]) -> None:
        if not problems:
            return
        ctx = self.ctx
        self.before = await self._evaluate(problems, self.engine, after=False)
        self.inputs = await self._write_inputs(problems)
        inputs = self.inputs
        # a reflective label (label=reflect) or TRT's knowledge (knowledge=trt) asks the run's engine (the base
        # weights) during training; the code's test inputs were written beforehand, so nothing else asks
        asks = "reflect" in self.selector.call_kinds() or self.settings.knowledge == "trt"

        def context(problem: Problem) -> SelectionContext:
            calls = ctx.on(problem) if asks else None
            return SelectionContext(seed=ctx.seed, sandbox=ctx.sandbox, inputs=inputs.get(problem.id), calls=calls)

        if self.settings.verl_run is not None and self.settings.verl_weights is not None:  # trained on verl
            if self.engine.model is not None:
                await self.engine.model.aclose()
            self.weights = self.settings.verl_weights
            join_recorded(Path(self.settings.verl_run), self.workdir, ctx.engine.ledger, self.settings.verl_step)
        else:
            await self.train(problems, self.settings, self.workdir, context=context, seed=ctx.seed)
        steps = read_steps(self.workdir / "ttrl" / "steps.jsonl")
        self.steps = len({step.step for step in steps})
        self.votes = _votes_by_problem(steps)
        await self.load(f"{ctx.engine.model_name}+ttrl")  # names the training: no base answer comes back

    async def answer(self, problem: Problem, arrival: int | None) -> ProblemResult:
        samples, greedy = (await self._evaluate([problem], self.engine, after=True))[problem.id]
        base_samples, base_greedy = self.before[problem.id]
        return ProblemResult(
            problem_id=problem.id,
            prediction=greedy.answer if greedy else None,
            candidates=samples,
            ttrl=TTRLRecord(
                before=TTRLEvaluation(
                    answers=tuple(c.answer for c in base_samples),
                    greedy=base_greedy.answer if base_greedy else None,
                ),
                greedy_after=greedy.answer if greedy else None,
                votes=tuple(self.votes.get(problem.id, [])),
                test_inputs=tuple(self.inputs.get(problem.id, ())),
            ),
        )

    async def _write_inputs(self, problems: Sequence[Problem]) -> dict[str, list[str]]:
        """What the selector writes ahead (`Selector.inputs_ahead`; code's execution: the base model writes each
        problem's test inputs once, shown its own evaluation samples, and every training step then runs the
        policy's programs on them and on the public examples; nothing for a vote on answers)."""
        selector, ctx = self.selector, self.ctx

        async def one(problem: Problem) -> tuple[str, list[str]]:
            written = await selector.inputs_ahead(problem, self.before[problem.id][0], ctx.selection(problem, step=0))
            return problem.id, written

        return dict(await gather_landed(*(one(p) for p in problems)))

    async def _evaluate(self, problems: Sequence[Problem], engine: RolloutEngine, after: bool) -> dict[str, Evaluation]:
        """The paper's protocol: k samples at the evaluation temperature, and one greedy answer."""
        s, ctx = self.settings, self.ctx
        kind = "eval_after" if after else "eval_before"

        async def one(problem: Problem) -> tuple[str, Evaluation]:
            calls = ctx.on(problem).with_engine(engine)
            samples = calls.sample(kind, self.samples)
            if not s.eval_greedy:
                return problem.id, (make_candidates(problem, await samples), None)
            top = calls.sample(f"{kind}_greedy", 1)
            done, best = await gather_landed(samples, top)
            return problem.id, (make_candidates(problem, done), make_candidates(problem, best)[0])

        return dict(await gather_landed(*(one(p) for p in problems)))


def _votes_by_problem(steps: Sequence[TTRLStep]) -> dict[str, list[TTRLVote]]:
    """Each problem's votes across training (step, label, kept answers, rewards), for the scorer's audit."""
    by_problem: dict[str, dict[int, TTRLVote]] = {}
    for record in steps:
        for vote in record.votes:
            # A step replayed after a resume overwrites its earlier record: one vote per problem and step.
            by_problem.setdefault(vote.problem_id, {})[record.step] = vote.model_copy(update={"step": record.step})
    return {pid: [steps[s] for s in sorted(steps)] for pid, steps in by_problem.items()}
