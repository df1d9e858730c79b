"""`--bench -`: a stream of problems on standard input, one JSON object a line, read as they arrive.

Columns are mapped as for any data file (`dataset.py`: `--bench-opt problem=... answer=... id=...`, else
guessed), line by line; a line with an answer is graded, one without is answered only. A bad line (not JSON,
no problem, a duplicate id) is one message and the stream goes on (`parse` raises a `UserError` the stream
runner records). Nothing is read before the run starts: `load` has no problems.
"""

from __future__ import annotations

from typing import Any

from testtime.benchmarks.base import Benchmark, SealedReferences
from testtime.benchmarks.dataset import Dataset
from testtime.benchmarks.rows import line_row
from testtime.core.records import Problem, Reference
from testtime.sandbox import Limits

STDIN = "-"


class StdinStream(Dataset):
    """Problems from standard input, parsed one line at a time by `parse`."""

    def __init__(self, data_dir: str | None = None, **options: Any) -> None:
        Benchmark.__init__(self, data_dir, **options)
        self.where, self.dataset, self.notes = STDIN, self.options, []
        self.rows, self.columns, self.mapping = [], [], {}
        self.domain = self.dataset.domain or "math"  # type: ignore[attr-defined]
        self.needs_sandbox = self.domain == "code"
        self.limits = Limits(timeout_s=self.dataset.timeout, early_exit=True)  # type: ignore[attr-defined]
        self.template = self._template()

    @property
    def name(self) -> str:  # type: ignore[override]
        return "stdin"

    @property
    def source(self) -> str:  # type: ignore[override]
        """The line being read: what the dataset's messages name."""
        return self.where

    def describe(self) -> dict[str, Any]:
        return {**Benchmark.describe(self), "source": STDIN, "domain": self.domain, "stream": True}

    def load(self) -> tuple[list[Problem], SealedReferences]:
        return [], SealedReferences([])

    def parse(self, line: str, number: int, place: int | None = None) -> tuple[Problem, Reference]:
        """Line `number` of this standard input as a problem and its reference; a `UserError` naming the line when
        it is not one. A line without an id is named by its `place` in the whole stream (default: its number),
        which a resumed stream continues while its lines are counted from 1 again."""
        self.where = f"stdin:{number}"
        row = line_row(line, self.where, number)
        self.rows, self.columns = [row], list(row)
        self.mapping = self._map()
        return self._problem(self._id(row, number if place is None else place), row)
