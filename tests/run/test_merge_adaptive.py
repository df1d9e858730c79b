"""`merge` re-derives each problem's adaptive record (`--adaptive`) by replaying the shard's vote from its cache
under the run's own settings: a forged count, rule, threshold, cap, reason, a record removed or added, or
candidates cut under an unchanged count is each refused in one line naming the problem and the field; an honest
pair still merges with the records the shards wrote."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.run.test_merge_forgery import _sharded, edit_jsonl, refused

Cli = Callable[..., Any]
SETTLES = ["It is \\boxed{1}.", "It is \\boxed{1}.", "It is \\boxed{2}."]  # 3 to 1 after four: posterior settles
SPLITS = ["It is \\boxed{1}.", "It is \\boxed{2}."]  # never settles: every vote draws its cap


def _adaptive_shards(testtime_cli: Cli, tmp_path: Path, replies: list[str], *args: str) -> tuple[Path, Path]:
    return _sharded(testtime_cli, tmp_path, replies, "--n", "12", *args)


@pytest.fixture
def settled(testtime_cli: Cli, tmp_path: Path) -> tuple[Path, Path]:
    shards = _adaptive_shards(testtime_cli, tmp_path, SETTLES, "--adaptive")
    first = json.loads((shards[0] / "results.jsonl").read_text().splitlines()[0])
    assert first["adaptive"]["reason"] == "settled" and first["adaptive"]["drawn"] == 4  # what is forged below
    honest = testtime_cli("merge", *map(str, shards), "--out", str(tmp_path / "honest"))
    assert honest.returncode == 0, honest.stderr  # the control: untouched shards merge
    merged = json.loads((tmp_path / "honest" / "summary.json").read_text())
    assert merged["adaptive"]["samples"] == 16 and merged["adaptive"]["rule"] == "posterior"
    return shards


@pytest.fixture
def capped(testtime_cli: Cli, tmp_path: Path) -> tuple[Path, Path]:
    shards = _adaptive_shards(testtime_cli, tmp_path, SPLITS, "--adaptive")
    first = json.loads((shards[0] / "results.jsonl").read_text().splitlines()[0])
    assert first["adaptive"]["reason"] == "cap" and len(first["candidates"]) == 12
    return shards


def _set(field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda row: row["adaptive"].update({field: value})


def _cut_candidates(row: dict[str, Any]) -> None:
    row["candidates"] = row["candidates"][:4]  # the selection (index 0 here) and the prediction still hold


def _remove(row: dict[str, Any]) -> None:
    row["adaptive"] = None


FORGERIES_OF_SETTLED = {
    "drawn huge": (_set("drawn", 10**30), "drawn"),
    "drawn negative": (_set("drawn", -5), "drawn"),
    "rule": (_set("rule", "window"), "rule"),
    "threshold": (_set("threshold", 0.55), "threshold"),
    "cap": (_set("cap", 1000), "cap"),
    "confidence": (_set("confidence", 0.999), "confidence"),
    "removed": (_remove, "adaptive"),
}


@pytest.mark.parametrize("name", sorted(FORGERIES_OF_SETTLED))
def test_a_forged_adaptive_record_is_refused(
    testtime_cli: Cli, tmp_path: Path, settled: tuple[Path, Path], name: str
) -> None:
    forge, field = FORGERIES_OF_SETTLED[name]
    edit_jsonl(settled[1] / "results.jsonl", forge)
    refused(testtime_cli, tmp_path, settled, "problem", field)


def test_a_count_that_is_not_a_number_is_refused(testtime_cli: Cli, tmp_path: Path, settled: tuple[Path, Path]) -> None:
    edit_jsonl(settled[0] / "results.jsonl", _set("drawn", "lots"))
    refused(testtime_cli, tmp_path, settled, "results.jsonl:1", "adaptive.drawn")


def test_a_capped_vote_passed_off_as_settled_is_refused(
    testtime_cli: Cli, tmp_path: Path, capped: tuple[Path, Path]
) -> None:
    edit_jsonl(capped[0] / "results.jsonl", lambda r: r["adaptive"].update(reason="settled", confidence=0.97))
    refused(testtime_cli, tmp_path, capped, "problem", "reason")


def test_candidates_cut_under_an_unchanged_count_are_refused(
    testtime_cli: Cli, tmp_path: Path, capped: tuple[Path, Path]
) -> None:
    edit_jsonl(capped[0] / "results.jsonl", _cut_candidates)
    refused(testtime_cli, tmp_path, capped, "problem", "candidates")


def test_a_record_added_to_a_fixed_run_is_refused(testtime_cli: Cli, tmp_path: Path) -> None:
    shards = _adaptive_shards(testtime_cli, tmp_path, SETTLES)
    stop = {"rule": "posterior", "threshold": 0.8, "drawn": 4, "cap": 12, "reason": "settled", "confidence": 0.9}
    edit_jsonl(shards[1] / "results.jsonl", lambda r: r.update(adaptive=stop))
    refused(testtime_cli, tmp_path, shards, "problem", "adaptive")
