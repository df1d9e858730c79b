"""`majority`: best of N without labels — N samples, then the selector (math: the largest class of
equivalent answers, self-consistency maj@N; code: execution on public + model-written tests in the sandbox;
free-form text: the medoid of the replies; any registered selector with `--selector`)."""

from __future__ import annotations

from testtime.core.records import Problem
from testtime.core.results import ProblemResult
from testtime.core.rollout import RolloutEngine
from testtime.methods import METHODS, MethodContext, PerProblem, SelectorChoice, make_candidates
from testtime.methods.plan import Plan, ProblemSet, RunBase

DEFAULT_N = 8


@METHODS.register(
    "majority", help=f"best of --n samples (default {DEFAULT_N}): vote (math), execution (code), medoid (text)"
)
class Majority(PerProblem):
    Options = SelectorChoice
    options: SelectorChoice

    def plan(self, problems: ProblemSet, base: RunBase, stream: bool = False) -> Plan:
        selector, params, n = self.options.build(problems.domain), base.sampling(), base.n or DEFAULT_N
        calls = n + selector.planned_calls()  # code: one more call writes test inputs; usc: its judgements
        return Plan.of(self, {"solve": params}, params, stream=stream, selector=selector, samples=n, calls=calls)

    async def solve(self, problem: Problem, ctx: MethodContext) -> ProblemResult:
        return await vote(problem, ctx)


async def vote(problem: Problem, ctx: MethodContext, engine: RolloutEngine | None = None) -> ProblemResult:
    """The plan's samples of the problem's `solve` calls (through `engine` where given: online TTRL answers a
    stream's arrivals this way with its current weights, the same rule as this method), then its selector's
    choice among them."""
    selector, n = ctx.plan.selector, ctx.plan.samples
    assert selector is not None and n is not None, "a vote's plan names its selector and samples"
    calls = ctx.on(problem) if engine is None else ctx.on(problem).with_engine(engine)
    completions = await calls.sample("solve", n)
    candidates = make_candidates(problem, completions)
    selection = await selector.select(problem, candidates, ctx.selection(problem))
    return ProblemResult(problem_id=problem.id, prediction=selection.answer, candidates=candidates, selection=selection)
