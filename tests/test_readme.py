"""The README holds for a new user. Its step 3 compares what it says it compares: its three commands, run as
written (a fake model substituted for the embedded one), give a report whose majority cells at matched rollouts
and at matched tokens are both filled; the hint a TRT run prints is itself a command whose majority run the
report accepts; and the site's Getting started repeats its first hour word for word."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.test_docs import REPO, blocks, commands_in

REPLIES = [f"Adding up. \\boxed{{{i % 3}}}" for i in range(7)]  # three answer classes: votes that mean something


def _step_3() -> list[list[str]]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("3. Compare methods")
    block = next(b for b in blocks(REPO / "README.md") if b.language == "bash" and text.count("\n", 0, start) < b.line)
    return commands_in(block.body)


def _matched_cells(report: dict[str, Any], method: str) -> tuple[dict[str, Any], dict[str, Any]]:
    row = next(r for r in report["runs"] if r["method"] == method)
    return row["majority_same_rollouts"], row["majority_same_tokens"]


def test_readme_step_3_fills_both_matched_cells(tmp_path: Path, testtime_cli: Callable[..., Any]) -> None:
    (tmp_path / "replies.json").write_text(json.dumps(REPLIES))
    commands = _step_3()
    assert [c[:2] for c in commands] == [["run", "--method"], ["run", "--method"], ["report", "runs/trt"]]
    for words in commands[:2]:
        ran = testtime_cli(*words, "--model", "fake:file:replies.json", cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr[-2000:]
    ran = testtime_cli(*commands[2], "--json", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    for cell in _matched_cells(json.loads(ran.stdout), "trt"):
        assert cell["none"] is None, cell["none"]
        assert cell["accuracy"] is not None and cell["k"] >= 1 and cell["difference"] is not None


def test_the_trt_tables_majority_hint_is_a_command_the_report_accepts(
    tmp_path: Path, testtime_cli: Callable[..., Any]
) -> None:
    (tmp_path / "replies.json").write_text(json.dumps(REPLIES))
    model = ("--model", "fake:file:replies.json", "--bench", "arith", "--limit", "4")
    ran = testtime_cli("run", "--method", "trt", "-T", "2", "-K", "2", *model, "--out", "trt", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    hint = re.search(r"(--method majority --n \d+[^(│]*)\(tokens", ran.stdout)
    assert hint, ran.stdout
    assert "--temperature 0.6" in hint[1] and "--max-tokens 32768" in hint[1]
    ran = testtime_cli("run", *hint[1].split(), *model, "--out", "maj", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr[-2000:]
    ran = testtime_cli("report", "trt", "maj", "--json", cwd=tmp_path)
    rollouts, _ = _matched_cells(json.loads(ran.stdout), "trt")
    assert rollouts["none"] is None and rollouts["k"] == int(hint[1].split()[3]), rollouts


def test_the_first_hour_reads_the_same_in_the_readme_and_on_the_site() -> None:
    """Getting started repeats the README's first hour (the site's links are relative to docs/): one text."""

    def first_hour(text: str) -> str:
        start = text.index("## Your first hour")
        return text[start : text.index("\n## ", start + 1)]

    readme = first_hour((REPO / "README.md").read_text(encoding="utf-8")).replace("](docs/", "](")
    assert readme == first_hour((REPO / "docs" / "getting-started.md").read_text(encoding="utf-8"))
