"""The docs' figures come from commands shown beside them: this re-runs the cheap one, the embedded model's
arith table on the majority page (its default row), with the command shown there, and checks every figure
against the table."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

PAGE = Path(__file__).resolve().parents[1] / "docs" / "methods" / "majority.md"


SEED_ROWS = ("| **2 (default)** |", "| 2, `--seed 1` |", "| 2, `--seed 2` |")
NAMES = ("pass@1", "low", "high", "2", "4", "8")


def arith_section() -> tuple[list[str], list[dict[str, float]]]:
    """The command shown under "Measured on the embedded model" and the figures of its three seeds' rows (the
    command's own first)."""
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("## Measured on the embedded model") :]
    lines = section.splitlines()
    command = next(line for line in lines if line.startswith("testtime run "))
    rows = []
    for start in SEED_ROWS:
        row = next(line for line in lines if line.startswith(start))
        numbers = [float(x) for x in re.findall(r"\d\.\d{3}", row)]
        assert len(numbers) == len(NAMES), row
        rows.append(dict(zip(NAMES, numbers, strict=True)))
    return shlex.split(command)[1:], rows


def test_the_page_shows_the_command_and_three_seeds() -> None:
    args, rows = arith_section()
    assert args[:4] == ["run", "--method", "majority", "--bench"] and "digits=2" in args
    assert "--seed" not in args  # the default row is the command's own seed
    for figures in rows:
        assert figures["low"] < figures["pass@1"] < figures["high"]
    assert len({tuple(figures.values()) for figures in rows}) == 3, "three seeds, three different draws"


@pytest.mark.slow
@pytest.mark.miniature  # a reproduction: CI's second stage, beside the TTRL miniature
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs the local extra (torch)")
def test_the_arith_table_reproduces(tmp_path: Path, testtime_cli: Callable[..., Any]) -> None:
    args, rows = arith_section()
    out = tmp_path / "run"
    done = testtime_cli(*args, "--out", str(out), "--quiet", cwd=tmp_path, env={"HF_HUB_OFFLINE": "1"}, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    measured = {"pass@1": summary["pass@1"]["mean"], **{k: summary["maj@k"][k] for k in ("2", "4", "8")}}
    page = rows[0]
    for name, value in measured.items():
        # Another CPU may round a logit, and flip a token, apart: allowed as far as the seeds spread, no further.
        spread = max(r[name] for r in rows) - min(r[name] for r in rows)
        assert abs(value - page[name]) <= spread, (name, value, page[name], spread)
    print(f"arith row re-run: {measured} (the page: {page})")
