"""`single`: one sample per problem (greedy with `--temperature 0`) — the cheapest baseline."""

from __future__ import annotations

from testtime.core.records import Problem
from testtime.core.results import ProblemResult
from testtime.methods import METHODS, MethodContext, PerProblem, make_candidates
from testtime.methods.plan import Plan, ProblemSet, RunBase


@METHODS.register("single", help="one sample per problem (greedy with --temperature 0)")
class Single(PerProblem):
    def plan(self, problems: ProblemSet, base: RunBase, stream: bool = False) -> Plan:
        params = base.sampling()
        hint = "it draws one sample; use --method majority --n N"
        return Plan.of(self, {"solve": params}, params, stream=stream, samples=1, calls=1, ignores={"n": hint})

    async def solve(self, problem: Problem, ctx: MethodContext) -> ProblemResult:
        completions = await ctx.on(problem).sample("solve", 1)
        candidates = make_candidates(problem, completions)
        return ProblemResult(problem_id=problem.id, prediction=candidates[0].answer, candidates=candidates)
