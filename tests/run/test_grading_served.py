"""`testtime grade --run`: a served run's requests graded once their labels are known, by the question each asked;
`results.jsonl` stays as answered, the grades go to `graded.jsonl`, the summary is written again. Wrong input
(a batch run, no question in common, a clash in the labels, a run still being served) is one line each."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testtime.run.directory import RunDir
from testtime.run.lifecycle import hold_lock

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"


@pytest.fixture
def served(tmp_path: Path) -> Path:
    """A served majority run of two requests, "Say 1." answered 1 and "Say 2." answered 2."""
    return Path(shutil.copytree(FIXTURES / "served-majority-v2", tmp_path / "served"))


def labels(tmp_path: Path, rows: list[tuple[str, str]], name: str = "labels.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps({"question": q, "answer": a}) + "\n" for q, a in rows))
    return path


def test_requests_are_graded_by_the_question_they_asked_and_the_run_keeps_them_as_answered(
    served: Path, tmp_path: Path, testtime_cli: Callable[..., Any]
) -> None:
    answered = (served / "results.jsonl").read_bytes()
    file = labels(tmp_path, [("Say 1.", "1"), ("  Say   2. ", "3"), ("Say 9.", "9")])  # spacing aside, by words
    done = testtime_cli("grade", "--bench", str(file), "--run", str(served), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [p["correct"] for p in report["per_problem"]] == [True, False] and report["unmatched_requests"] == 0
    summary = json.loads((served / "summary.json").read_text())
    assert summary["accuracy"]["mean"] == 0.5 and summary["labelled"] == 2
    assert (served / "results.jsonl").read_bytes() == answered  # kept as answered: unlabelled
    grades = RunDir(served).read_later_grades()
    assert len({g.problem for g in grades.values()}) == 2 and {g.bench for g in grades.values()} == {str(file)}
    assert [r.correct for r in RunDir(served).read_results()] == [True, False]  # readers see them graded

    # a later label for one request replaces its grade and keeps the other's; the predictions file routes here
    again = testtime_cli("grade", "--bench", str(labels(tmp_path, [("Say 2.", "2")], "late.jsonl")),
                         "--predictions", str(served / "predictions.jsonl"))  # fmt: skip
    assert again.returncode == 0, again.stderr
    said = " ".join((again.stdout + again.stderr).split())
    assert "graded 1 requests" in said and "1 asked no question of it" in said
    assert [r.correct for r in RunDir(served).read_results()] == [True, True]
    assert json.loads((served / "summary.json").read_text())["accuracy"]["mean"] == 1.0


def test_what_cannot_be_graded_is_one_line(served: Path, tmp_path: Path, testtime_cli: Callable[..., Any]) -> None:
    def refused(*args: str) -> str:
        done = testtime_cli("grade", *args)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        return " ".join(done.stderr.split())

    file = labels(tmp_path, [("Say 1.", "1")])
    batch = Path(shutil.copytree(FIXTURES / "majority-arith-schema2", tmp_path / "batch"))
    assert "its problems were graded as they were answered" in refused("--bench", str(file), "--run", str(batch))
    other = labels(tmp_path, [("Say 7.", "7")], "other.jsonl")
    assert "no request of" in refused("--bench", str(other), "--run", str(served))
    clash = labels(tmp_path, [("Say 1.", "1"), ("Say 1.", "2")], "clash.jsonl")  # one question, two labels
    assert "no request of" in refused("--bench", str(clash), "--run", str(served))
    assert "one of them" in refused("--bench", str(file))
    lock = hold_lock(RunDir(served))  # a server still writing it
    try:
        assert "is being written by process" in refused("--bench", str(file), "--run", str(served))
    finally:
        lock.close()
    assert not (served / "graded.jsonl").exists()
