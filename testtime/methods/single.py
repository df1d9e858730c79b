"""`single`: one sample per problem (greedy with `--temperature 0`) — the cheapest baseline."""

from __future__ import annotations

from testtime.core.errors import UserError
from testtime.core.records import Problem
from testtime.methods import METHODS, Method, MethodContext, ProblemResult, make_candidates


@METHODS.register("single", help="one sample per problem (greedy with --temperature 0)")
class Single(Method):
    name = "single"

    async def solve(self, problem: Problem, ctx: MethodContext) -> ProblemResult:
        if ctx.n not in (None, 1):
            raise UserError("method single draws one sample; use --method majority for --n > 1")
        completions = await ctx.engine.sample(ctx.prompt(problem), 1, ctx.params, problem_id=problem.id)
        candidates = make_candidates(problem, completions)
        return ProblemResult(problem_id=problem.id, prediction=candidates[0].answer, candidates=candidates)
