"""`majority`: best of N without labels — N samples, then the selector (math: the largest class of
equivalent answers, self-consistency maj@N; code: execution on public + model-written tests in the sandbox;
free-form text: the medoid of the replies; any registered selector with `--selector`)."""

from __future__ import annotations

from testtime.core.records import Problem
from testtime.core.results import ProblemResult
from testtime.core.rollout import RolloutEngine
from testtime.methods import METHODS, SAMPLING_FLAGS, MethodContext, PerProblem, SelectorChoice, make_candidates
from testtime.selectors import Selector

DEFAULT_N = 8


@METHODS.register(
    "majority", help=f"best of --n samples (default {DEFAULT_N}): vote (math), execution (code), medoid (text)"
)
class Majority(PerProblem):
    name = "majority"
    Options = SelectorChoice
    run_flags = SAMPLING_FLAGS | {"n"}

    def planned_calls(self, domain: str, n: int | None) -> int | None:
        return (n or DEFAULT_N) + self._selector_planned_calls()  # code: one more call writes test inputs

    def effective_n(self, n: int | None) -> int | None:
        return n or DEFAULT_N

    async def solve(self, problem: Problem, ctx: MethodContext) -> ProblemResult:
        return await vote(problem, ctx, ctx.engine, ctx.n or DEFAULT_N, self.selector_for(problem.domain))


async def vote(
    problem: Problem, ctx: MethodContext, engine: RolloutEngine, n: int, selector: Selector
) -> ProblemResult:
    """N samples of `engine` at the plan's `solve` sampling, then the selector's choice among them (online TTRL
    answers a stream's arrivals this way with its current weights: the same rule as this method)."""
    completions = await engine.sample(ctx.prompt(problem), n, ctx.sampled("solve"), problem_id=problem.id)
    candidates = make_candidates(problem, completions)
    selection = await selector.select(problem, candidates, ctx.selection())
    return ProblemResult(problem_id=problem.id, prediction=selection.answer, candidates=candidates, selection=selection)
