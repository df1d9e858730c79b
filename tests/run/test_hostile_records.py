"""Characters that break line-based readers: U+2028, U+2029, U+0085 and the other code points `str.splitlines`
splits on, in a problem's statement and a model's answers. JSON writes them raw; a record is one "\\n" line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

from testtime.core.jsonl import record_lines

Cli = Callable[..., CompletedProcess[str]]
BREAKERS = "\u2028\u2029\u0085\x1c\x1d\x1e\x0b\x0c"


def test_record_lines_split_on_newline_only() -> None:
    text = json.dumps({"a": f"x{BREAKERS}y"}, ensure_ascii=False) + "\n\n" + json.dumps({"b": 1}) + "\n"
    assert [json.loads(line) for line in record_lines(text)] == [{"a": f"x{BREAKERS}y"}, {"b": 1}]


def test_a_run_with_line_breaking_characters_finishes_resumes_lists_and_views(
    testtime_cli: Cli, tmp_path: Path
) -> None:
    data = tmp_path / "mine.jsonl"
    rows = [{"id": f"q{i}", "problem": f"What is {i}+1?{BREAKERS}end", "answer": str(i + 1)} for i in range(3)]
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    responses = tmp_path / "responses.json"
    answers = [f"so{BREAKERS}it is \\boxed{{{k}}}{BREAKERS}" for k in (1, 2, 3, 2)]
    responses.write_text(json.dumps(answers, ensure_ascii=False), encoding="utf-8")
    out = tmp_path / "run"
    model = f"fake:file:{responses}"
    done = testtime_cli("run", "--method", "majority", "--bench", str(data), "--n", "4", "--quiet",
                        "--model", model, "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = (out / "results.jsonl").read_text(encoding="utf-8")
    assert "\u2028" in results  # written raw, as JSON allows: the readers must cope
    assert len(results.split("\n")) == 4  # three records, one "\n" line each
    resumed = testtime_cli("run", "--resume", str(out), "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["problems"] == 3
    listed = testtime_cli("runs", str(out), "--csv")
    assert listed.returncode == 0 and "majority" in listed.stdout, listed.stderr
    page = tmp_path / "view.html"
    viewed = testtime_cli("view", str(out), "--html", str(page))
    assert viewed.returncode == 0, viewed.stderr
    assert "\u2028" not in page.read_text(encoding="utf-8")  # escaped for the page's script
