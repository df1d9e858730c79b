"""`majority`: best of N without labels — N samples; math: the largest cluster of equivalent answers
(self-consistency, maj@N); code: the execution selector (public + model-written tests in the sandbox)."""

from __future__ import annotations

from typing import Any

from testtime.core.records import Problem
from testtime.methods import METHODS, Method, MethodContext, ProblemResult, make_candidates
from testtime.methods.best_of import BestOf

DEFAULT_N = 8


@METHODS.register("majority", help=f"best of --n samples (default {DEFAULT_N}): vote (math), execution (code)")
class Majority(Method):
    name = "majority"

    def __init__(
        self, tie_policy: str = "earliest", test_inputs: int | str = 10, predicted_outputs: bool | str = False
    ) -> None:
        self.best_of = BestOf(tie_policy, test_inputs, predicted_outputs)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, **self.best_of.describe()}

    async def solve(self, problem: Problem, ctx: MethodContext) -> ProblemResult:
        n = ctx.n or DEFAULT_N
        completions = await ctx.engine.sample(ctx.prompt(problem), n, ctx.params, problem_id=problem.id)
        candidates = make_candidates(problem, completions)
        selection = await self.best_of.select(problem, candidates, ctx)
        return ProblemResult(
            problem_id=problem.id, prediction=selection.answer, candidates=candidates, selection=selection
        )
