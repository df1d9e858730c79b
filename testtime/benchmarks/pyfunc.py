"""`pyfunc`: synthetic, seeded, offline function-writing tasks — the embedded model's code playground.

Each problem asks for one small Python function (functional tests, LiveCodeBench's format: one JSON value per
line per argument, the expected JSON value): `level=1` single operations (a - b, the larger of a and b, the
last element of a list), `level=2` (the default) compound ones with seeded constants (3 * a + 2 * b, the
number of elements above 4). One example with its output is part of the statement (the public test, as in
LiveCodeBench); five more, seeded, are hidden. A two-example chat prefix shows the fenced-block format.
Measured on the embedded model (T=1.0, 64 new tokens, 8 samples per task): pass@1 ≈ 0.5 on single
operations, lower on compound ones (docs/methods/ttrl.md, TTRL on code).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from testtime.benchmarks.base import BENCHMARKS, SealedReferences
from testtime.benchmarks.code_common import CodeBenchmark
from testtime.core.options import Options
from testtime.core.records import Message, Problem, Reference, TestCase

FEW_SHOT = (
    Message(role="user", content="Write a Python function `add(a, b)` that returns a + b."),
    Message(role="assistant", content="```python\ndef add(a, b):\n    return a + b\n```"),
    Message(role="user", content="Write a Python function `first(xs)` that returns the first element of the list xs."),
    Message(role="assistant", content="```python\ndef first(xs):\n    return xs[0]\n```"),
)
HIDDEN = 5


@dataclass(frozen=True)
class Template:
    name: str
    args: str  # "ab" (two integers), "abc" (three), "xs" (a list of integers)
    text: str  # what the function returns; {p} and {q} are seeded constants
    fn: Callable[..., Any]


LEVELS: dict[int, tuple[Template, ...]] = {
    1: (
        Template("sub", "ab", "a - b", lambda a, b, p, q: a - b),
        Template("mul", "ab", "a * b", lambda a, b, p, q: a * b),
        Template("larger", "ab", "the larger of a and b", lambda a, b, p, q: max(a, b)),
        Template("square", "a", "a squared", lambda a, p, q: a * a),
        Template("last", "xs", "the last element of the list xs", lambda xs, p, q: xs[-1]),
        Template("total", "xs", "the sum of the list xs", lambda xs, p, q: sum(xs)),
    ),
    2: (
        Template("lin", "ab", "{p} * a + {q} * b", lambda a, b, p, q: p * a + q * b),
        Template("shifted", "ab", "a * b + {p}", lambda a, b, p, q: a * b + p),
        Template("gap", "ab", "the absolute difference of a and b", lambda a, b, p, q: abs(a - b)),
        Template("sum3", "abc", "a + b + c", lambda a, b, c, p, q: a + b + c),
        Template("bump", "a", "{p} * a + {q}", lambda a, p, q: p * a + q),
        Template("larger_plus", "ab", "the larger of a and b, plus {p}", lambda a, b, p, q: max(a, b) + p),
        Template("scaled_sum", "xs", "{p} times the sum of the list xs", lambda xs, p, q: p * sum(xs)),
        Template(
            "above",
            "xs",
            "how many elements of the list xs are greater than {p}",
            lambda xs, p, q: sum(x > p for x in xs),
        ),
    ),
}


def _arguments(shape: str, rng: random.Random) -> list[Any]:
    if shape == "xs":
        return [[rng.randint(-9, 9) for _ in range(rng.randint(1, 6))]]
    return [rng.randint(-20, 20) for _ in shape]


def _case(template: Template, p: int, q: int, rng: random.Random) -> TestCase:
    args = _arguments(template.args, rng)
    expected = template.fn(*args, p, q)
    return TestCase(input="\n".join(json.dumps(a) for a in args), output=json.dumps(expected), testtype="functional")


class PyFuncOptions(Options):
    level: int = Field(2, ge=1, le=2, description="1: single operations; 2: compound ones with seeded constants")
    size: int = Field(32, ge=1, description="problems")
    seed: int = Field(0, description="the generator's seed")


@BENCHMARKS.register("pyfunc", help="synthetic seeded Python function tasks; options level=2 size=32 seed=0")
class PyFunc(CodeBenchmark):
    Options = PyFuncOptions
    options: PyFuncOptions

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, **self.options.model_dump()}

    def load(self) -> tuple[list[Problem], SealedReferences]:
        level = self.options.level
        rng = random.Random(f"pyfunc-{level}-{self.options.seed}")
        templates = LEVELS[level]
        problems, references = [], []
        for i in range(self.options.size):
            template = templates[i % len(templates)]
            p, q = rng.randint(2, 5), rng.randint(2, 5)
            func = f"{template.name}_{i}"
            params = "xs" if template.args == "xs" else ", ".join(template.args)
            example = _case(template, p, q, rng)
            shown = ", ".join(example.input.splitlines())
            statement = (
                f"Write a Python function `{func}({params})` that returns {template.text.format(p=p, q=q)}.\n"
                f"Example: {func}({shown}) returns {example.output}."
            )
            pid = f"pyfunc-l{level}-{i}"
            hidden = tuple(_case(template, p, q, rng) for _ in range(HIDDEN))
            problems.append(
                Problem(
                    id=pid, domain="code", statement=statement, public_tests=(example,), metadata={"func_name": func}
                )
            )
            references.append(Reference(problem_id=pid, hidden_tests=(example, *hidden), metadata={"func_name": func}))
        return problems, SealedReferences(references)

    def prompt(self, problem: Problem) -> list[Message]:
        return [*FEW_SHOT, Message(role="user", content=problem.statement.split("\nExample:")[0])]
