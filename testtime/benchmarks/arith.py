"""`arith`: synthetic, seeded, offline integer arithmetic — the embedded model's playground.

Difficulty knob `digits` (operand size) and `ops` (which of + - * appear). A two-example chat prefix shows
the `\\boxed{}` format: without it SmolLM2-135M almost never boxes (environment.md §9). Measured on the
embedded model (T=0.7): `digits=1` is easy (pass@1 ≈ 0.85), `digits=2` (the default) lands in the TTRL regime
(pass@1 ≈ 0.3, majority vote higher). The measured table: docs/methods/majority.md.
"""

from __future__ import annotations

import random
from typing import Any

from pydantic import Field

from testtime.benchmarks.base import BENCHMARKS, Benchmark, Grade, SealedReferences
from testtime.benchmarks.dataset import grade_answer
from testtime.core.options import Options
from testtime.core.records import Message, Problem, Reference

FEW_SHOT = (
    Message(role="user", content="What is 2 + 5?"),
    Message(role="assistant", content="2 + 5 = 7. The answer is \\boxed{7}."),
    Message(role="user", content="What is 3 * 4?"),
    Message(role="assistant", content="3 * 4 = 12. The answer is \\boxed{12}."),
)
_APPLY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


class ArithOptions(Options):
    digits: int = Field(2, ge=1, le=6, description="operand size in digits (1 easy, 2 the TTRL regime)")
    ops: str = Field("+", pattern=r"^[-+*]+$", description="operators drawn from '+-*'")
    size: int = Field(32, ge=1, description="problems")
    seed: int = Field(0, description="the generator's seed")


@BENCHMARKS.register("arith", help="synthetic seeded integer arithmetic; options digits=2 ops=+ size=32 seed=0")
class Arith(Benchmark):
    domain = "math"
    Options = ArithOptions
    options: ArithOptions

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, **self.options.model_dump()}  # synthetic: a data dir is accepted, unused

    def load(self) -> tuple[list[Problem], SealedReferences]:
        o = self.options
        rng = random.Random(f"arith-{o.digits}-{o.ops}-{o.seed}")
        low, high = 10 ** (o.digits - 1) if o.digits > 1 else 0, 10**o.digits - 1
        problems, references = [], []
        for i in range(o.size):
            a, b, op = rng.randint(low, high), rng.randint(low, high), rng.choice(o.ops)
            pid = f"arith-d{o.digits}-{i}"
            problems.append(Problem(id=pid, domain="math", statement=f"What is {a} {op} {b}?"))
            references.append(Reference(problem_id=pid, answer=str(_APPLY[op](a, b))))
        return problems, SealedReferences(references)

    def prompt(self, problem: Problem) -> list[Message]:
        return [*FEW_SHOT, Message(role="user", content=problem.statement)]

    def grade(self, prediction: str | None, reference: Reference) -> Grade:
        return grade_answer(prediction, reference)
