"""Runs written by an earlier version replay with the current code: same cache keys (no sample missing) and
same predictions for majority on math. TRT's math prompts changed on purpose since (the earlier answer's
summary and the wrong-answer list, as the reference shows them), so an older TRT run cannot replay: the
replay says so through error samples, never through invented answers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from testtime.core.ledger import read_entries
from testtime.run.directory import RunDir

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"


def _replayed(name: str, tmp_path: Path, testtime_cli):  # type: ignore[no-untyped-def]
    """Replay a copy of fixture `name`: its folder, the replay's, its results then (raw) and now, by problem."""
    run = tmp_path / name
    shutil.copytree(FIXTURES / name, run)
    original = {r["problem_id"]: r for r in map(json.loads, (run / "results.jsonl").read_text().splitlines())}
    done = testtime_cli("run", "--replay", str(run), "--quiet")
    assert done.returncode == 0, done.stderr
    [replay] = [p for p in run.iterdir() if p.name.startswith("replay-")]
    replayed = {r.problem_id: r for r in RunDir(replay).read_results()}
    assert replayed.keys() == original.keys()
    return run, replay, original, replayed


@pytest.mark.parametrize("name", ["majority-arith-v0", "majority-arith-schema2"])
def test_an_older_run_replays_to_the_same_predictions(name: str, tmp_path: Path, testtime_cli) -> None:  # type: ignore[no-untyped-def]
    run, replay, original, replayed = _replayed(name, tmp_path, testtime_cli)
    for pid, old in original.items():
        new = replayed[pid]
        assert new.prediction == old["prediction"]
        assert all(c.error is None for c in new.candidates)  # a cache miss would be an error candidate
        assert new.selection is not None and new.selection.index == old["selection"]["index"]
        old_rounds = old.get("details", {}).get("rounds", [])
        assert [r.selected_answer for r in new.rounds] == [r["selected_answer"] for r in old_rounds]
    paid_then = [e for e in read_entries(run / "ledger.jsonl") if not e.cached]
    hits_now = [e for e in read_entries(replay / "ledger.jsonl") if e.cached]
    assert len(hits_now) == len(paid_then) > 0  # every call the run paid for is found again, none is missing


def test_an_older_trt_run_replays_as_missing_samples_not_as_answers(tmp_path: Path, testtime_cli) -> None:  # type: ignore[no-untyped-def]
    run = tmp_path / "trt"
    shutil.copytree(FIXTURES / "trt-arith-v0", run)
    testtime_cli("run", "--replay", str(run), "--quiet")
    [replay] = [p for p in run.iterdir() if p.name.startswith("replay-")]
    records = RunDir(replay).read_results()
    candidates = [c for r in records for c in r.candidates]
    assert candidates and all(c.error and "not in the cache" in c.error and c.answer is None for c in candidates)


@pytest.mark.parametrize("name", ["trt-arith-v6", "rsa-arith-v6", "trt-pyfunc-v6"])
def test_a_run_made_before_the_call_handle_replays_every_sample(name: str, tmp_path: Path, testtime_cli) -> None:  # type: ignore[no-untyped-def]
    """TRT (strategies, rollouts, reflections at their step and slot seeds; on code, the test inputs at theirs)
    and RSA (a population, then aggregations at their slots) made at 49d3ad6, before calls went through
    `ctx.on(problem)`: every call the run paid for has the same cache key now (a moved seed or kind would be a
    miss, an error candidate), and each round selects what it selected then."""
    if name.startswith("trt-pyfunc") and shutil.which("bwrap") is None:
        pytest.skip("the code run replays its selection in the bwrap sandbox it was made in (bubblewrap not here)")
    run, replay, original, replayed = _replayed(name, tmp_path, testtime_cli)
    for pid, old in original.items():
        new = replayed[pid]
        assert new.prediction == old["prediction"]
        assert not [c.error for r in new.rounds for c in r.candidates if c.error]  # a miss is an error candidate
        assert [r.selected_answer for r in new.rounds] == [r["selected_answer"] for r in old["rounds"]]
    calls_then = [e for e in read_entries(run / "ledger.jsonl") if e.kind == "model_call"]
    paid_then = [(e.problem_id, e.purpose, e.step) for e in calls_then if not e.cached]
    hits_now = [(e.problem_id, e.purpose, e.step) for e in read_entries(replay / "ledger.jsonl") if e.cached]
    assert sorted(hits_now) == sorted(paid_then) and paid_then  # every kind and step found again, none missing
