"""The `Benchmark` contract, the sealed references, and where data comes from.

`load()` returns problems (what methods see) and `SealedReferences` (what only the scorer reads).
Data: `--data-dir` / `TESTTIME_DATA_DIR` holding `<bench>.jsonl`, else the public hub dataset. A benchmark's
options are a pydantic model (`Options`, as methods declare theirs): `--bench-opt KEY=VALUE` and the flags
its fields declare (`--release`, `--difficulty`...) are checked there, with one line per mistake.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from testtime.core.errors import UserError
from testtime.core.options import Options
from testtime.core.records import Message, Problem, Record, Reference
from testtime.core.registry import Registry
from testtime.sandbox import Sandbox


class Grade(Record):
    """One prediction graded against its reference: correct or not, what was graded, and why."""

    correct: bool
    answer: str | None  # the prediction as graded (extracted answer or program); None = no answer
    # math: correct | wrong | no_answer; code: correct | no_code | compile_error | the first failing verdict
    status: str


class SealedReferences(Mapping[str, Reference]):
    """Problem id → Reference. Handed to the scorer and the audit, never to a method."""

    def __init__(self, references: list[Reference]) -> None:
        self._by_id = {r.problem_id: r for r in references}

    def __getitem__(self, problem_id: str) -> Reference:
        return self._by_id[problem_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)


class Benchmark(ABC):
    """A set of problems with sealed references: `load` them, `prompt` one, `grade` a prediction. Register a
    subclass with `@BENCHMARKS.register(name)`; its options are a pydantic `Options` model (`--bench-opt`)."""

    name: str
    domain: str
    Options: ClassVar[type[Options]] = Options  # no options unless a benchmark declares them
    needs_sandbox = False  # code benchmarks grade by running programs; the runner hands them a sandbox
    sandbox: Sandbox | None = None
    notes: list[str] | tuple[str, ...] = ()  # what loading did that a user should read (a guessed column mapping)

    def __init__(self, data_dir: str | Path | None = None, **options: Any) -> None:
        self.data_dir = data_dir
        self.options = self.Options.parse(options, f"benchmark {self.name}")

    @abstractmethod
    def load(self) -> tuple[list[Problem], SealedReferences]:
        """All problems in a stable order, and their references."""

    @abstractmethod
    def prompt(self, problem: Problem) -> list[Message]:
        """The conversation that asks the model to solve one problem."""

    @abstractmethod
    def grade(self, prediction: str | None, reference: Reference) -> Grade:
        """Grade one prediction (an extracted answer, or a completion containing one)."""

    def describe(self) -> dict[str, Any]:
        """The benchmark as it was loaded: its name, every option after defaults, and where data came from."""
        return {"name": self.name, **self.options.model_dump(mode="json"), "data_dir": self._data_dir_text()}

    def _data_dir_text(self) -> str | None:
        return str(self.data_dir) if self.data_dir else None

    def close(self) -> None:
        """Release what grading opened (a sandbox)."""
        if self.sandbox is not None:
            self.sandbox.close()


BENCHMARKS: Registry[Benchmark] = Registry(
    "benchmark",
    tuple(
        f"testtime.benchmarks.{m}"
        for m in ("aime24", "aime25", "aime26", "amc23", "math500", "hmmt", "arith", "lcb", "pyfunc")
    ),
)


def data_dir(explicit: str | Path | None) -> Path | None:
    """The local data folder, if one is given; it must exist."""
    chosen = explicit or os.environ.get("TESTTIME_DATA_DIR")
    if not chosen:
        return None
    path = Path(chosen).expanduser()
    if not path.is_dir():
        raise UserError(f"data dir {path} is not a readable folder")
    return path


def unique_ids(ids: list[str], source: str) -> None:
    """Two problems with one id would share one result line and one reference: refuse them."""
    seen: set[str] = set()
    for pid in ids:
        if pid in seen:
            raise UserError(f"{source}: problem id '{pid}' appears twice")
        seen.add(pid)
