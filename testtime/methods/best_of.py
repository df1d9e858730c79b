"""Label-free best-of-N, shared by `majority` and `rsa`: math → the equivalence-aware vote, code → the
execution selector (public + model-written tests in the sandbox)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from testtime.core.errors import UserError
from testtime.core.records import Candidate, Problem, Selection
from testtime.methods import MethodContext, option_flag
from testtime.selectors.execution import ExecutionSelector
from testtime.selectors.majority import MajoritySelector


class BestOf:
    def __init__(
        self, tie_policy: str = "earliest", test_inputs: int | str = 10, predicted_outputs: bool | str = False
    ) -> None:
        try:
            inputs = int(test_inputs)
        except ValueError:
            raise UserError(f"test_inputs must be an integer, not '{test_inputs}'") from None
        self.vote = MajoritySelector(tie_policy)
        self.execution = ExecutionSelector(inputs, option_flag(predicted_outputs))

    def describe(self) -> dict[str, Any]:
        return {
            "tie_policy": self.vote.tie_policy,
            "test_inputs": self.execution.n_inputs,
            "predicted_outputs": self.execution.predicted_outputs,
        }

    async def select(
        self, problem: Problem, candidates: Sequence[Candidate], ctx: MethodContext, step: int | None = None
    ) -> Selection:
        if problem.domain == "code":
            context = {
                "seed": ctx.seed,
                "engine": ctx.engine,
                "params": ctx.params,
                "sandbox": ctx.sandbox,
                "step": step,
            }
            return await self.execution.aselect(problem, candidates, context)
        return self.vote.select(problem, candidates, {"seed": ctx.seed})
