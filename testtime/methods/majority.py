"""`majority`: self-consistency, maj@N — N samples, the majority selector picks the answer."""

from __future__ import annotations

from typing import Any

from testtime.core.records import Problem
from testtime.methods import METHODS, Method, MethodContext, ProblemResult, math_candidates
from testtime.selectors.majority import MajoritySelector

DEFAULT_N = 8


@METHODS.register("majority", help=f"self-consistency: --n samples (default {DEFAULT_N}), majority vote")
class Majority(Method):
    name = "majority"

    def __init__(self, tie_policy: str = "earliest") -> None:
        self.selector = MajoritySelector(tie_policy)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "tie_policy": self.selector.tie_policy}

    async def solve(self, problem: Problem, ctx: MethodContext) -> ProblemResult:
        n = ctx.n or DEFAULT_N
        completions = await ctx.engine.sample(ctx.prompt(problem), n, ctx.params, problem_id=problem.id)
        candidates = math_candidates(completions)
        selection = self.selector.select(problem, candidates, {"seed": ctx.seed})
        return ProblemResult(
            problem_id=problem.id, prediction=selection.answer, candidates=candidates, selection=selection
        )
