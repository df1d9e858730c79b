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


def arith_section() -> tuple[list[str], dict[str, float]]:
    """The command shown under "Measured on the embedded model" and the default row's figures."""
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("## Measured on the embedded model") :]
    command = next(line for line in section.splitlines() if line.startswith("testtime run "))
    row = next(line for line in section.splitlines() if line.startswith("| **2 (default)** |"))
    numbers = [float(x) for x in re.findall(r"\d\.\d{3}", row)]
    pass1, low, high, maj2, maj4, maj8 = numbers
    return shlex.split(command)[1:], {"pass@1": pass1, "low": low, "high": high, "2": maj2, "4": maj4, "8": maj8}


def test_the_page_shows_the_command_and_the_row() -> None:
    args, figures = arith_section()
    assert args[:4] == ["run", "--method", "majority", "--bench"] and "digits=2" in args
    assert figures["low"] < figures["pass@1"] < figures["high"]


@pytest.mark.slow
@pytest.mark.miniature  # a reproduction: CI's second stage, beside the TTRL miniature
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs the local extra (torch)")
def test_the_arith_table_reproduces(tmp_path: Path, testtime_cli: Callable[..., Any]) -> None:
    args, figures = arith_section()
    out = tmp_path / "run"
    done = testtime_cli(*args, "--out", str(out), "--quiet", cwd=tmp_path, env={"HF_HUB_OFFLINE": "1"}, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    tolerance = (figures["high"] - figures["low"]) / 2  # another CPU may round a logit, and flip a token, apart
    measured = {"pass@1": summary["pass@1"]["mean"], **{k: summary["maj@k"][k] for k in ("2", "4", "8")}}
    for name, value in measured.items():
        assert abs(value - figures[name]) <= tolerance, (name, value, figures[name])
    print(f"arith row re-run: {measured} (the page: {figures})")
