"""`rsa`: Recursive Self-Aggregation (arXiv 2509.26626), the strongest published baseline for TRT.

Step 1 samples a population of N answers. Each later step fills N slots: for each, K members of the current
population drawn uniformly without replacement (seeded) are shown to the model, which merges them into one
improved solution; the N results replace the population (no elitism, no scoring). T counts the first step,
so a problem costs N·T generations. Reported both ways: the population's mean accuracy (the paper's metric)
and the accuracy of a label-free pick from the final population (the selector: vote for math, execution
for code).
"""

from __future__ import annotations

from pydantic import model_validator

from testtime.core.options import flag
from testtime.core.records import Candidate, Message, Problem, SamplingParams
from testtime.core.results import ProblemResult, RoundCandidate, RoundRecord
from testtime.core.rollout import gather_landed
from testtime.methods import METHODS, MethodContext, PerProblem, SelectorChoice, make_candidates
from testtime.methods.plan import Plan, ProblemSet, RunBase

AGGREGATE = """### Candidate solutions (some may be wrong)
{candidates}

Aggregate the useful ideas of these candidates into one improved solution. Where they disagree, work out \
which path is correct; if all are wrong, try a different approach. {ending}"""
ENDINGS = {
    "math": "End with the final answer in \\boxed{}.",
    "code": "Give the complete solution as one fenced ```python block.",
    "text": "Give only the improved response itself, as the final reply to the request above.",
}


# trt.md §11 (RSA's eval_code.py CLI): temperature 1.0, max new tokens 8,192.
DEFAULT_SAMPLING = SamplingParams(temperature=1.0, max_tokens=8192)


class RSAOptions(SelectorChoice):
    population: int = flag(16, "population size N", ge=1)
    aggregate: int = flag(4, "members merged per new solution K", ge=1)
    steps: int = flag(10, "steps T, the first generation included (N·T calls per problem)", ge=1)
    excerpt_chars: int | None = flag(
        None,
        "show the aggregator only each candidate's last N characters (default: full texts, as the reference)",
        ge=1,
    )

    @model_validator(mode="after")
    def _check(self) -> RSAOptions:
        if self.aggregate > self.population:
            raise ValueError("rsa needs aggregate <= population")
        return self


@METHODS.register("rsa", help="recursive self-aggregation: population N (16), aggregate K (4), steps T (10)")
class RSA(PerProblem):
    Options = RSAOptions
    options: RSAOptions

    def plan(self, problems: ProblemSet, base: RunBase, stream: bool = False) -> Plan:
        selector, params, o = self.options.build(problems.domain), base.sampling(DEFAULT_SAMPLING), self.options
        return Plan.of(
            self,
            {"solve": params, "aggregate": params},
            params,
            stream=stream,
            selector=selector,
            calls=o.population * o.steps + selector.planned_calls(),
            rounds=o.steps,  # a population of N through T steps: no fixed number of samples an answer is drawn from
            ignores={"n": "its population is --method-opt population=N"},
        )

    async def solve(self, problem: Problem, ctx: MethodContext) -> ProblemResult:
        n = self.options.population
        saved = ctx.checkpoints.last(problem.id)
        if saved is None:
            completions = await ctx.on(problem).sample("solve", n, step=1)
            population = make_candidates(problem, completions)
            await self._checkpoint(problem, ctx, 1, population)
        else:
            population = [Candidate.model_validate(c) for c in saved["population"]]
        for step in range(int(saved["round"]) + 1 if saved else 2, self.options.steps + 1):
            population = await self._aggregate(problem, ctx, step, population)
            await self._checkpoint(problem, ctx, step, population)
        selector = ctx.plan.selector
        assert selector is not None, "rsa's plan names its selector"
        selection = await selector.select(problem, population, ctx.selection(problem, step=self.options.steps))
        rounds = tuple(RoundRecord.model_validate(e["record"]) for e in ctx.checkpoints.rounds(problem.id))
        return ProblemResult(
            problem_id=problem.id,
            prediction=selection.answer,
            candidates=population,
            selection=selection,
            rounds=rounds,
        )

    async def _aggregate(
        self, problem: Problem, ctx: MethodContext, step: int, population: list[Candidate]
    ) -> list[Candidate]:
        calls = ctx.on(problem)
        rng, base = calls.rng(step), calls.prompt
        requests = []
        for slot in range(self.options.population):
            picked = rng.sample(population, self.options.aggregate)
            cap = self.options.excerpt_chars
            shown = "\n\n".join(
                f"#### Candidate {i + 1}\n{c.text[-cap:] if cap else c.text}" for i, c in enumerate(picked)
            )
            section = AGGREGATE.format(candidates=shown, ending=ENDINGS[problem.domain])
            messages = [*base[:-1], Message(role=base[-1].role, content=f"{base[-1].content}\n\n{section}")]
            requests.append(calls.sample("aggregate", 1, messages, step=step, slot=slot))
        completions = [r[0] for r in await gather_landed(*requests)]
        return [
            c.model_copy(update={"index": (step - 1) * self.options.population + i})
            for i, c in enumerate(make_candidates(problem, completions))
        ]

    async def _checkpoint(self, problem: Problem, ctx: MethodContext, step: int, population: list[Candidate]) -> None:
        # Per step, a label-free pick for the audit's curve: the vote on math (cheap); code picks only at the end.
        selected = None
        if problem.domain == "math" and ctx.plan.selector is not None:
            selected = (await ctx.plan.selector.select(problem, population, ctx.selection(problem))).answer
        record = RoundRecord(
            round=step,
            selected_answer=selected,
            candidates=tuple(
                RoundCandidate(index=c.index, answer=c.answer, error=c.error, tokens=c.completion_tokens)
                for c in population
            ),
        )
        ctx.checkpoints.append(
            problem.id,
            step,
            {"population": [c.model_dump(mode="json") for c in population], "record": record.model_dump(mode="json")},
        )
