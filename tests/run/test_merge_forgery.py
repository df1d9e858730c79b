"""`merge` re-derives what a shard hands it: a forged prediction, a candidate's answer or text edited to match
it, a minority answer passed off as the vote's, an inflated or padded ledger and an edited problem are each
refused in one line, and nothing is written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Cli = Callable[..., Any]
REPLIES = ["It is \\boxed{1}.", "It is \\boxed{2}.", "It is \\boxed{1}."]  # a vote of 2 to 1 on every problem


@pytest.fixture
def shards(testtime_cli: Cli, tmp_path: Path) -> tuple[Path, Path]:
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(REPLIES))
    paths = []
    for index in (1, 2):
        path = tmp_path / f"shard{index}"
        done = testtime_cli("run", "--bench", "arith", "--limit", "6", "--n", "3", "--concurrency", "1", "--quiet",
                            "--model", f"fake:file:{script}", "--shard", f"{index}/2", "--out", str(path))  # fmt: skip
        assert done.returncode == 0, done.stderr
        paths.append(path)
    honest = testtime_cli("merge", *map(str, paths), "--out", str(tmp_path / "honest"))
    assert honest.returncode == 0, honest.stderr  # the control: untouched shards merge
    return paths[0], paths[1]


def edit_jsonl(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    change(rows[0])
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def refused(testtime_cli: Cli, tmp_path: Path, shards: tuple[Path, Path], *words: str) -> None:
    out = tmp_path / "merged"
    done = testtime_cli("merge", *map(str, shards), "--out", str(out))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    for word in words:
        assert word in done.stderr, done.stderr
    assert not out.exists()


def test_a_forged_prediction_is_refused(testtime_cli: Cli, tmp_path: Path, shards: tuple[Path, Path]) -> None:
    edit_jsonl(shards[1] / "results.jsonl", lambda r: r.update(prediction="12345"))
    refused(testtime_cli, tmp_path, shards, "prediction is not the selected candidate's answer")


def forge_answer(row: dict[str, Any]) -> None:
    """The prediction, the selection and the chosen candidate's answer agree on 9; its text still says 1."""
    row["prediction"] = row["selection"]["answer"] = row["candidates"][row["selection"]["index"]]["answer"] = "9"


def forge_text(row: dict[str, Any]) -> None:
    """As `forge_answer`, and the chosen candidate's text rewritten to say 9 too."""
    forge_answer(row)
    row["candidates"][row["selection"]["index"]]["text"] = "It is \\boxed{9}."


@pytest.mark.parametrize(
    ("forge", "words"),
    [(forge_answer, "answer is not the one its text gives"), (forge_text, "text is not its model call's in the cache")],
)
def test_a_candidate_edited_to_match_a_forged_prediction_is_refused(
    testtime_cli: Cli, tmp_path: Path, shards: tuple[Path, Path], forge: Callable[[dict[str, Any]], None], words: str
) -> None:
    edit_jsonl(shards[0] / "results.jsonl", forge)
    refused(testtime_cli, tmp_path, shards, words)


def test_a_minority_answer_passed_off_as_the_vote_is_refused(
    testtime_cli: Cli, tmp_path: Path, shards: tuple[Path, Path]
) -> None:
    def forge(row: dict[str, Any]) -> None:
        minority = next(c for c in row["candidates"] if c["answer"] == "2")
        row["selection"]["index"], row["selection"]["answer"], row["prediction"] = minority["index"], "2", "2"

    edit_jsonl(shards[1] / "results.jsonl", forge)
    refused(testtime_cli, tmp_path, shards, "not in the largest answer class")


@pytest.mark.parametrize("how", ["inflate", "pad"])
def test_a_forged_ledger_is_refused(testtime_cli: Cli, tmp_path: Path, shards: tuple[Path, Path], how: str) -> None:
    ledger = shards[0] / "ledger.jsonl"
    if how == "inflate":
        edit_jsonl(ledger, lambda e: e.update(completion_tokens=e["completion_tokens"] * 1000))
    else:
        first = ledger.read_text().splitlines()[0]
        ledger.write_text(ledger.read_text() + first + "\n")
    refused(testtime_cli, tmp_path, shards, "ledger.jsonl was edited")


def test_an_edited_problem_is_refused(testtime_cli: Cli, tmp_path: Path, shards: tuple[Path, Path]) -> None:
    edit_jsonl(shards[1] / "problems.jsonl", lambda p: p.update(statement=p["statement"] + " (easy)"))
    refused(testtime_cli, tmp_path, shards, "differs from the benchmark's own")


def _sharded(testtime_cli: Cli, tmp_path: Path, replies: list[str], *args: str) -> tuple[Path, Path]:
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(replies))
    paths = []
    for index in (1, 2):
        path = tmp_path / f"shard{index}"
        done = testtime_cli("run", "--bench", "arith", "--limit", "4", "--concurrency", "1", "--quiet", *args,
                            "--model", f"fake:file:{script}", "--shard", f"{index}/2", "--out", str(path))  # fmt: skip
        assert done.returncode == 0, done.stderr
        paths.append(path)
    return paths[0], paths[1]


def _move_selection(row: dict[str, Any], other: dict[str, Any]) -> None:
    """The selection, its answer and the prediction moved together to `other` (every earlier check passes)."""
    row["selection"]["index"], row["selection"]["answer"] = other["index"], other["answer"]
    row["prediction"] = other["answer"]


def test_a_majority_tie_switched_to_the_other_class_is_refused(testtime_cli: Cli, tmp_path: Path) -> None:
    """Both classes are largest, so the prediction checks passed it: the replay breaks the tie by the recorded
    rule (earliest) and disagrees (0.125 → 0.25 accuracy, once)."""
    shards = _sharded(testtime_cli, tmp_path, ["It is \\boxed{1}.", "It is \\boxed{2}."], "--n", "2")

    def forge(row: dict[str, Any]) -> None:
        other = next(c for c in row["candidates"] if c["answer"] != row["prediction"])
        _move_selection(row, other)

    edit_jsonl(shards[1] / "results.jsonl", forge)
    refused(testtime_cli, tmp_path, shards, "is not what its selector makes of the cached candidates")


def test_a_trt_selection_moved_to_another_candidate_is_refused(testtime_cli: Cli, tmp_path: Path) -> None:
    replies = ["It is \\boxed{1}.", "It is \\boxed{2}.", "It is \\boxed{3}."]
    shards = _sharded(testtime_cli, tmp_path, replies, "--method", "trt", "-T", "2", "-K", "2")

    def forge(row: dict[str, Any]) -> None:
        other = next(c for c in row["candidates"] if c["answer"] not in (None, row["prediction"]))
        _move_selection(row, other)

    edit_jsonl(shards[0] / "results.jsonl", forge)
    refused(testtime_cli, tmp_path, shards, "is not what its selector makes of the cached candidates")


def test_a_forged_failed_call_line_is_refused(testtime_cli: Cli, tmp_path: Path, shards: tuple[Path, Path]) -> None:
    ledger = shards[0] / "ledger.jsonl"
    line = json.loads(ledger.read_text().splitlines()[0])
    line.update(error="upstream failed", prompt_tokens=10**7, completion_tokens=10**7, cached=False)
    ledger.write_text(ledger.read_text() + json.dumps(line) + "\n")
    refused(testtime_cli, tmp_path, shards, "more than any call of this run could")


def test_a_shard_whose_cache_is_not_its_settings_is_refused(
    testtime_cli: Cli, tmp_path: Path, shards: tuple[Path, Path]
) -> None:
    for shard in shards:  # both, so they still agree with each other
        config = json.loads((shard / "config.json").read_text())
        config["run"]["seed"] = 7
        (shard / "config.json").write_text(json.dumps(config))
    refused(testtime_cli, tmp_path, shards, "does not come back from the cache under the recorded settings")
