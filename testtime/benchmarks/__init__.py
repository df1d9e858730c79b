"""Benchmarks: registered ones by name (one small file each), and any data file or hub dataset (`dataset.py`).

`benchmark_for(bench, data_dir, options)` is how a run gets one: a registered name, else a path to a
`.jsonl`/`.json`/`.csv`/`.parquet` file, else `hf:ORG/NAME`; anything else is one line naming what exists.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testtime.benchmarks.base import BENCHMARKS, Benchmark, Grade, SealedReferences
from testtime.benchmarks.rows import SUFFIXES
from testtime.core.errors import UserError


def load_benchmarks() -> None:
    """The built-ins (any read of BENCHMARKS loads them too) and the plugins."""
    from testtime.core.plugins import load_plugins

    BENCHMARKS.load_builtins()

    load_plugins()  # after the built-ins: a plugin reusing a name fails alone


def is_dataset(bench: str) -> bool:
    """Whether `--bench` names a data file or hub dataset rather than a registered benchmark."""
    return bench.startswith("hf:") or Path(bench).suffix.lower() in SUFFIXES


def benchmark_for(
    bench: str, data_dir: str | Path | None = None, options: dict[str, Any] | None = None, limit: int | None = None
) -> Benchmark:
    """The benchmark `bench` names; a data file reads only its first `limit` rows (built-in sets are small)."""
    load_benchmarks()
    if bench in BENCHMARKS.names():
        return BENCHMARKS.get(bench)(data_dir=data_dir, **(options or {}))
    if bench == "-":
        from testtime.benchmarks.stdin import StdinStream

        return StdinStream(data_dir, **(options or {}))
    if is_dataset(bench):
        from testtime.benchmarks.dataset import Dataset

        return Dataset(data_dir, source=bench, limit=limit, **(options or {}))
    raise UserError(
        f"unknown benchmark '{bench}'; registered: {', '.join(BENCHMARKS.names())}; or a data file "
        f"({', '.join(SUFFIXES)}), hf:ORG/NAME, or - (a stream on standard input); a plugin's? give --plugin "
        "FILE.py, or install the package that declares it"
    )


def options_of(bench: str) -> type:
    """The options model of what `--bench` names (for its flags and `--bench-opt` help)."""
    load_benchmarks()
    if bench in BENCHMARKS.names():
        return BENCHMARKS.get(bench).Options  # type: ignore[attr-defined,no-any-return]
    from testtime.benchmarks.dataset import DatasetOptions

    return DatasetOptions


__all__ = ["BENCHMARKS", "Benchmark", "Grade", "SealedReferences", "benchmark_for", "load_benchmarks"]
