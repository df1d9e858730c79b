"""Benchmarks, one small file each, registered by name in `BENCHMARKS`; plus metrics and scoring."""

from __future__ import annotations

import importlib

from testtime.benchmarks.base import BENCHMARKS, Benchmark, Grade, SealedReferences

_MODULES = ("aime24", "aime25", "amc23", "math500", "arith", "lcb", "pyfunc")


def load_benchmarks() -> None:
    for module in _MODULES:
        importlib.import_module(f"testtime.benchmarks.{module}")


__all__ = ["BENCHMARKS", "Benchmark", "Grade", "SealedReferences", "load_benchmarks"]
