"""`rsa`: Recursive Self-Aggregation (arXiv 2509.26626), the strongest published baseline for TRT.

Step 1 samples a population of N answers. Each later step fills N slots: for each, K members of the current
population drawn uniformly without replacement (seeded) are shown to the model, which merges them into one
improved solution; the N results replace the population (no elitism, no scoring). T counts the first step,
so a problem costs N·T generations. Reported both ways: the population's mean accuracy (the paper's metric)
and the accuracy of a label-free pick from the final population (vote for math, execution for code).
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from testtime.core.errors import UserError
from testtime.core.records import Candidate, Message, Problem
from testtime.methods import METHODS, Method, MethodContext, ProblemResult, make_candidates
from testtime.methods.best_of import BestOf

EXCERPT = 4000
AGGREGATE = """### Candidate solutions (some may be wrong)
{candidates}

Aggregate the useful ideas of these candidates into one improved solution. Where they disagree, work out \
which path is correct; if all are wrong, try a different approach. {ending}"""
ENDINGS = {
    "math": "End with the final answer in \\boxed{}.",
    "code": "Give the complete solution as one fenced ```python block.",
}


@METHODS.register("rsa", help="recursive self-aggregation: population N (16), aggregate K (4), steps T (10)")
class RSA(Method):
    name = "rsa"

    def __init__(
        self,
        population: int | str = 16,
        aggregate: int | str = 4,
        steps: int | str = 10,
        tie_policy: str = "earliest",
        test_inputs: int | str = 10,
        predicted_outputs: bool | str = False,
    ) -> None:
        try:
            self.population, self.aggregate, self.steps = int(population), int(aggregate), int(steps)
        except ValueError:
            raise UserError("rsa: population, aggregate and steps must be integers") from None
        if not 1 <= self.aggregate <= self.population or self.steps < 1:
            raise UserError("rsa needs 1 <= aggregate <= population and steps >= 1")
        self.best_of = BestOf(tie_policy, test_inputs, predicted_outputs)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "population": self.population,
            "aggregate": self.aggregate,
            "steps": self.steps,
            **self.best_of.describe(),
        }

    async def solve(self, problem: Problem, ctx: MethodContext) -> ProblemResult:
        n = self.population
        saved = ctx.checkpoints.last(problem.id)
        if saved is None:
            completions = await ctx.engine.sample(
                ctx.prompt(problem), n, ctx.params, problem_id=problem.id, purpose="solve", step=1
            )
            population = make_candidates(problem, completions)
            await self._checkpoint(problem, ctx, 1, population)
        else:
            population = [Candidate.model_validate(c) for c in saved["population"]]
        for step in range(int(saved["round"]) + 1 if saved else 2, self.steps + 1):
            population = await self._aggregate(problem, ctx, step, population)
            await self._checkpoint(problem, ctx, step, population)
        selection = await self.best_of.select(problem, population, ctx, step=self.steps)
        records = [e["record"] for e in ctx.checkpoints.rounds(problem.id)]
        return ProblemResult(
            problem_id=problem.id,
            prediction=selection.answer,
            candidates=population,
            selection=selection,
            details={"rounds": records},
        )

    async def _aggregate(
        self, problem: Problem, ctx: MethodContext, step: int, population: list[Candidate]
    ) -> list[Candidate]:
        rng = random.Random(f"{ctx.seed}-{problem.id}-{step}")
        base = ctx.prompt(problem)
        requests = []
        for slot in range(self.population):
            picked = rng.sample(population, self.aggregate)
            shown = "\n\n".join(f"#### Candidate {i + 1}\n{c.text[-EXCERPT:]}" for i, c in enumerate(picked))
            section = AGGREGATE.format(candidates=shown, ending=ENDINGS[problem.domain])
            messages = [*base[:-1], Message(role=base[-1].role, content=f"{base[-1].content}\n\n{section}")]
            requests.append(
                ctx.engine.sample(
                    messages, 1, ctx.params_for(step, slot), problem_id=problem.id, purpose="aggregate", step=step
                )
            )
        completions = [r[0] for r in await asyncio.gather(*requests)]
        return [
            c.model_copy(update={"index": (step - 1) * self.population + i})
            for i, c in enumerate(make_candidates(problem, completions))
        ]

    async def _checkpoint(self, problem: Problem, ctx: MethodContext, step: int, population: list[Candidate]) -> None:
        # Per step, a label-free pick for the audit's curve: the vote on math (cheap); code picks only at the end.
        selected = None
        if problem.domain == "math":
            selected = (await self.best_of.select(problem, population, ctx)).answer
        record = {
            "round": step,
            "selected_answer": selected,
            "candidates": [{"index": c.index, "answer": c.answer, "tokens": c.completion_tokens} for c in population],
        }
        ctx.checkpoints.append(
            problem.id, step, {"population": [c.model_dump(mode="json") for c in population], "record": record}
        )
