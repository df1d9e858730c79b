"""`majority`: best of N without labels — N samples, then the selector (math: the largest class of
equivalent answers, self-consistency maj@N; code: execution on public + model-written tests in the sandbox;
free-form text: the medoid of the replies; any registered selector with `--selector`)."""

from __future__ import annotations

from testtime.core.adaptive import Adaptive, AdaptiveStop
from testtime.core.calls import Calls
from testtime.core.errors import UserError
from testtime.core.records import Candidate, Completion, Problem
from testtime.core.results import ProblemResult
from testtime.core.rollout import RolloutEngine
from testtime.methods import METHODS, MethodContext, PerProblem, SelectorChoice, make_candidates
from testtime.methods.plan import Plan, ProblemSet, RunBase
from testtime.selectors import Selector

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
        if base.adaptive is not None and type(selector).vote_classes is Selector.vote_classes:
            raise UserError(
                f"--adaptive stops a vote once its classes of answers settle; the {selector.name} selector weighs "
                "all the samples together (on code: --selector majority votes on identical programs)"
            )
        return Plan.of(
            self,
            {"solve": params},
            params,
            stream=stream,
            selector=selector,
            samples=n,
            calls=calls,
            adaptive=base.adaptive,
        )

    async def solve(self, problem: Problem, ctx: MethodContext) -> ProblemResult:
        return await vote(problem, ctx)


async def vote(problem: Problem, ctx: MethodContext, engine: RolloutEngine | None = None) -> ProblemResult:
    """The plan's samples of the problem's `solve` calls (through `engine` where given: online TTRL answers a
    stream's arrivals this way with its current weights, the same rule as this method), then its selector's
    choice among them."""
    selector, n = ctx.plan.selector, ctx.plan.samples
    assert selector is not None and n is not None, "a vote's plan names its selector and samples"
    calls = ctx.on(problem) if engine is None else ctx.on(problem).with_engine(engine)
    stop = None
    if ctx.plan.adaptive is None:
        candidates = make_candidates(problem, await calls.sample("solve", n))
    else:
        candidates, stop = await _until_settled(problem, calls, n, ctx.plan.adaptive, selector)
    selection = await selector.select(problem, candidates, ctx.selection(problem))
    return ProblemResult(
        problem_id=problem.id, prediction=selection.answer, candidates=candidates, selection=selection, adaptive=stop
    )


async def _until_settled(
    problem: Problem, calls: Calls, cap: int, rule: Adaptive, selector: Selector
) -> tuple[list[Candidate], AdaptiveStop]:
    """The vote's samples in waves (the same call continued: a fixed run's first samples, seed for seed) until the
    rule finds it settled or `cap` are drawn."""
    completions: list[Completion] = []
    for drawn in rule.schedule(cap):
        completions += await calls.sample("solve", drawn - len(completions))
        candidates = make_candidates(problem, completions)
        answers = [c.answer for c in candidates]
        stop = rule.verdict(rule.counted(answers, selector.vote_classes(problem, answers) or []), drawn, cap)
        if stop is not None:
            return candidates, stop
    raise AssertionError("unreachable: the schedule ends at the cap, where every vote stops")
