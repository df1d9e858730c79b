"""`arith`: synthetic, seeded, offline integer arithmetic — the embedded model's playground.

Difficulty knob `digits` (operand size) and `ops` (which of + - * appear). A two-example chat prefix shows
the `\\boxed{}` format: without it SmolLM2-135M almost never boxes (environment.md §9). Measured on the
embedded model (T=0.7): `digits=1` is easy (pass@1 ≈ 0.85), `digits=2` (the default) lands in the TTRL regime
(pass@1 ≈ 0.3, majority vote higher). See README for the measured table.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from testtime.benchmarks.base import BENCHMARKS, SealedReferences
from testtime.benchmarks.math_common import MathBenchmark
from testtime.core.errors import UserError
from testtime.core.records import Message, Problem, Reference

FEW_SHOT = (
    Message(role="user", content="What is 2 + 5?"),
    Message(role="assistant", content="2 + 5 = 7. The answer is \\boxed{7}."),
    Message(role="user", content="What is 3 * 4?"),
    Message(role="assistant", content="3 * 4 = 12. The answer is \\boxed{12}."),
)
_APPLY = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


@BENCHMARKS.register("arith", help="synthetic seeded integer arithmetic; options digits=2 ops=+ size=32 seed=0")
class Arith(MathBenchmark):
    name = "arith"
    hub_id = "(synthetic)"

    def __init__(
        self,
        data_dir: str | Path | None = None,
        digits: int | str = 2,
        ops: str = "+",
        size: int | str = 32,
        seed: int | str = 0,
    ) -> None:
        super().__init__()  # synthetic: a data dir is accepted (runs pass one to every benchmark) and unused
        try:
            self.digits, self.size, self.seed = int(digits), int(size), int(seed)
        except ValueError:
            raise UserError("arith options digits, size and seed must be integers") from None
        if not 1 <= self.digits <= 6 or self.size < 1 or not ops or set(ops) - set(_APPLY):
            raise UserError("arith needs 1 <= digits <= 6, size >= 1, and ops drawn from '+-*'")
        self.ops = ops

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "digits": self.digits, "ops": self.ops, "size": self.size, "seed": self.seed}

    def load(self) -> tuple[list[Problem], SealedReferences]:
        rng = random.Random(f"arith-{self.digits}-{self.ops}-{self.seed}")
        low, high = 10 ** (self.digits - 1) if self.digits > 1 else 0, 10**self.digits - 1
        problems, references = [], []
        for i in range(self.size):
            a, b, op = rng.randint(low, high), rng.randint(low, high), rng.choice(self.ops)
            pid = f"arith-d{self.digits}-{i}"
            problems.append(Problem(id=pid, domain="math", statement=f"What is {a} {op} {b}?"))
            references.append(Reference(problem_id=pid, answer=str(_APPLY[op](a, b))))
        return problems, SealedReferences(references)

    def prompt(self, problem: Problem) -> list[Message]:
        return [*FEW_SHOT, Message(role="user", content=problem.statement)]
