"""`majority`: best of N without labels — N samples; math: the largest cluster of equivalent answers
(self-consistency, maj@N); code: the execution selector (public + model-written tests in the sandbox)."""

from __future__ import annotations

from typing import Any

from testtime.core.errors import UserError
from testtime.core.records import Problem
from testtime.methods import METHODS, Method, MethodContext, ProblemResult, make_candidates
from testtime.selectors.execution import ExecutionSelector
from testtime.selectors.majority import MajoritySelector

DEFAULT_N = 8


@METHODS.register("majority", help=f"self-consistency: --n samples (default {DEFAULT_N}), majority vote")
class Majority(Method):
    name = "majority"

    def __init__(
        self, tie_policy: str = "earliest", test_inputs: int | str = 10, predicted_outputs: bool | str = False
    ) -> None:
        try:
            inputs = int(test_inputs)
        except ValueError:
            raise UserError(f"majority: test_inputs must be an integer, not '{test_inputs}'") from None
        self.selector = MajoritySelector(tie_policy)
        self.code_selector = ExecutionSelector(inputs, str(predicted_outputs).lower() in ("1", "true", "yes"))

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "tie_policy": self.selector.tie_policy,
            "test_inputs": self.code_selector.n_inputs,
            "predicted_outputs": self.code_selector.predicted_outputs,
        }

    async def solve(self, problem: Problem, ctx: MethodContext) -> ProblemResult:
        n = ctx.n or DEFAULT_N
        completions = await ctx.engine.sample(ctx.prompt(problem), n, ctx.params, problem_id=problem.id)
        candidates = make_candidates(problem, completions)
        if problem.domain == "code":
            context = {"seed": ctx.seed, "engine": ctx.engine, "params": ctx.params, "sandbox": ctx.sandbox}
            selection = await self.code_selector.aselect(problem, candidates, context)
        else:
            selection = self.selector.select(problem, candidates, {"seed": ctx.seed})
        return ProblemResult(
            problem_id=problem.id, prediction=selection.answer, candidates=candidates, selection=selection
        )
