"""`single`: one sample per problem (greedy with `--temperature 0`) — the cheapest baseline."""

from __future__ import annotations

from typing import ClassVar

from testtime.core.records import Problem
from testtime.core.results import ProblemResult
from testtime.methods import METHODS, MethodContext, PerProblem, make_candidates


@METHODS.register("single", help="one sample per problem (greedy with --temperature 0)")
class Single(PerProblem):
    name = "single"
    flag_hints: ClassVar[dict[str, str]] = {"n": "it draws one sample; use --method majority --n N"}

    def planned_calls(self, domain: str, n: int | None) -> int | None:
        return 1

    def effective_n(self, n: int | None) -> int | None:
        return 1

    async def solve(self, problem: Problem, ctx: MethodContext) -> ProblemResult:
        completions = await ctx.engine.sample(ctx.prompt(problem), 1, ctx.sampled("solve"), problem_id=problem.id)
        candidates = make_candidates(problem, completions)
        return ProblemResult(problem_id=problem.id, prediction=candidates[0].answer, candidates=candidates)
