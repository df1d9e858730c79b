"""Shards and merge: `--shard I/N` slices, `testtime merge` joins them into the run an unsharded command makes,
and refuses what is not one run cut in N (another seed, a shard twice or missing, an unfinished shard)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from testtime.core.errors import UserError
from testtime.run.shard import interleave, parse_shard, shard_of

RUN = (
    "run",
    "--method",
    "majority",
    "--bench",
    "arith",
    "--limit",
    "10",
    "--n",
    "3",
    "--model",
    "fake:echo",
    "--quiet",
)


def results(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]


def test_shards_partition_the_problems_and_interleave_restores_the_order() -> None:
    items = list(range(11))
    slices = [shard_of(items, f"{i}/3") for i in (1, 2, 3)]
    assert slices == [[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8]]
    assert interleave(slices) == items
    assert shard_of(items, "1/1") == items
    assert interleave([shard_of(items[:2], f"{i}/5") for i in range(1, 6)]) == items[:2]  # empty shards


@pytest.mark.parametrize("text", ["0/4", "5/4", "1/0", "2", "a/b", "1/4/2", "-1/4", ""])
def test_a_malformed_shard_is_a_user_error(text: str) -> None:
    with pytest.raises(UserError, match="--shard"):
        parse_shard(text)


def test_a_bad_shard_flag_fails_in_one_line_before_writing(testtime_cli: Callable, tmp_path: Path) -> None:
    done = testtime_cli(*RUN, "--shard", "0/4", "--out", str(tmp_path / "x"))
    assert done.returncode != 0 and "--shard" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "x").exists()


def test_a_method_that_learns_across_problems_refuses_shards(testtime_cli: Callable, tmp_path: Path) -> None:
    ttrl = ("run", "--method", "ttrl", "--bench", "arith", "--limit", "4", "--quiet")  # the embedded model
    done = testtime_cli(*ttrl, "--shard", "1/2", "--out", str(tmp_path / "t"))
    assert done.returncode != 0 and "learns across the problems" in done.stderr
    streamed = testtime_cli(*RUN, "--stream", "--shard", "1/2", "--out", str(tmp_path / "s"))
    assert streamed.returncode != 0 and "--shard splits a batch run" in streamed.stderr


def _shards(testtime_cli: Callable, tmp_path: Path, count: int, *extra: str) -> list[Path]:
    paths = []
    for index in range(1, count + 1):
        path = tmp_path / f"shard{index}"
        done = testtime_cli(*RUN, *extra, "--shard", f"{index}/{count}", "--out", str(path))
        assert done.returncode == 0, done.stderr
        paths.append(path)
    return paths


def test_merged_shards_equal_the_unsharded_run(testtime_cli: Callable, tmp_path: Path) -> None:
    shards = _shards(testtime_cli, tmp_path, 3)
    assert [len(results(s)) for s in shards] == [4, 3, 3]
    whole = tmp_path / "whole"
    assert testtime_cli(*RUN, "--out", str(whole)).returncode == 0
    merged = tmp_path / "merged"
    done = testtime_cli("merge", *map(str, reversed(shards)), "--out", str(merged))  # any order given
    assert done.returncode == 0, done.stderr
    assert results(merged) == results(whole)  # same problems, same order, same answers and grades
    mine, theirs = json.loads((merged / "summary.json").read_text()), json.loads((whole / "summary.json").read_text())
    assert theirs["wall_s"] is not None and mine["wall_s"] is None  # shards run apart are no one run's wall clock
    assert {k: v for k, v in mine.items() if k != "wall_s"} == {k: v for k, v in theirs.items() if k != "wall_s"}
    assert (merged / "predictions.jsonl").read_text() == (whole / "predictions.jsonl").read_text()
    ledger = (merged / "ledger.jsonl").read_text().splitlines()
    assert len(ledger) == 30 == sum(len((s / "ledger.jsonl").read_text().splitlines()) for s in shards)
    manifest = json.loads((merged / "config.json").read_text())
    assert manifest["run"]["shard"] is None and len(manifest["merged_from"]) == 3
    assert manifest["effective"]["problems"] == 10
    trace = (merged / "trace.jsonl").read_text().splitlines()
    assert len(trace) == 30
    # Replay of the merged run answers every call from the merged cache: nothing missing.
    replay = testtime_cli("run", "--replay", str(merged), "--quiet")
    assert replay.returncode == 0, replay.stderr
    replayed = next(merged.glob("replay-*"))
    assert results(replayed) == results(whole)


def test_merge_refuses_shards_of_another_run(testtime_cli: Callable, tmp_path: Path) -> None:
    one, _ = _shards(testtime_cli, tmp_path / "a", 2)
    _, other = _shards(testtime_cli, tmp_path / "b", 2, "--seed", "7")
    done = testtime_cli("merge", str(one), str(other), "--out", str(tmp_path / "m"))
    assert done.returncode != 0 and "differs from the first shard in run.seed" in done.stderr
    assert not (tmp_path / "m").exists()  # refused before anything was written


def test_merge_refuses_a_missing_or_doubled_shard(testtime_cli: Callable, tmp_path: Path) -> None:
    first, second, _ = _shards(testtime_cli, tmp_path, 3)
    missing = testtime_cli("merge", str(first), str(second), "--out", str(tmp_path / "m1"))
    assert missing.returncode != 0 and "shards 3/3 are missing" in missing.stderr
    twice = testtime_cli("merge", str(first), str(first), str(second), "--out", str(tmp_path / "m2"))
    assert twice.returncode != 0 and "shard 1/3 is given twice" in twice.stderr


def test_merge_refuses_an_unfinished_shard_and_a_plain_run(testtime_cli: Callable, tmp_path: Path) -> None:
    first, second = _shards(testtime_cli, tmp_path, 2)
    (second / "summary.json").unlink()  # as a shard killed before it finished leaves it
    lines = (second / "results.jsonl").read_text().splitlines()
    (second / "results.jsonl").write_text("\n".join(lines[:2]) + "\n")
    done = testtime_cli("merge", str(first), str(second), "--out", str(tmp_path / "m"))
    assert done.returncode != 0 and "is not finished (2 problems done)" in done.stderr
    assert f"--resume {second}" in done.stderr
    plain = tmp_path / "plain"
    assert testtime_cli(*RUN, "--out", str(plain)).returncode == 0
    refused = testtime_cli("merge", str(plain), "--out", str(tmp_path / "m2"))
    assert refused.returncode != 0 and "is not a shard" in refused.stderr


def test_shards_may_differ_in_where_they_were_served(testtime_cli: Callable, tmp_path: Path) -> None:
    first, second = _shards(testtime_cli, tmp_path, 2)
    manifest = json.loads((second / "config.json").read_text())
    manifest["run"]["concurrency"] = 3  # another machine, another setting of its own
    (second / "config.json").write_text(json.dumps(manifest))
    done = testtime_cli("merge", str(first), str(second), "--out", str(tmp_path / "m"))
    assert done.returncode == 0, done.stderr


def test_merge_refuses_a_relabelled_copy_of_another_shard(testtime_cli: Callable, tmp_path: Path) -> None:
    """Shard 1/2 copied and its manifest relabelled 2/2: a "complete" run of 5 problems, each twice."""
    import shutil

    first, second = _shards(testtime_cli, tmp_path, 2)
    shutil.rmtree(second)
    shutil.copytree(first, second)
    manifest = json.loads((second / "config.json").read_text())
    manifest["run"]["shard"] = "2/2"
    (second / "config.json").write_text(json.dumps(manifest))
    done = testtime_cli("merge", str(first), str(second), "--out", str(tmp_path / "m"))
    assert done.returncode != 0 and "does not hold shard 2/2's problems" in done.stderr, done.stderr
    assert not (tmp_path / "m").exists()


def test_merge_grades_again_and_ignores_a_forged_correct_field(testtime_cli: Callable, tmp_path: Path) -> None:
    first, second = _shards(testtime_cli, tmp_path, 2)
    honest = tmp_path / "honest"
    assert testtime_cli("merge", str(first), str(second), "--out", str(honest)).returncode == 0
    forged = [json.loads(line) for line in (second / "results.jsonl").read_text().splitlines()]
    for record in forged:
        record["correct"], record["status"] = True, "correct"
    (second / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in forged))
    merged = tmp_path / "merged"
    done = testtime_cli("merge", str(first), str(second), "--out", str(merged))
    assert done.returncode == 0, done.stderr
    assert results(merged) == results(honest)
    accuracy = [json.loads((m / "summary.json").read_text())["accuracy"] for m in (merged, honest)]
    assert accuracy[0] == accuracy[1]


def test_merge_refuses_a_problem_answered_twice(testtime_cli: Callable, tmp_path: Path) -> None:
    first, second = _shards(testtime_cli, tmp_path, 2)
    lines = (second / "results.jsonl").read_text().splitlines()
    (second / "results.jsonl").write_text("\n".join([*lines, lines[0]]) + "\n")
    done = testtime_cli("merge", str(first), str(second), "--out", str(tmp_path / "m"))
    assert done.returncode != 0 and "is answered twice" in done.stderr, done.stderr
