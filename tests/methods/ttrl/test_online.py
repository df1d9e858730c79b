"""Online TTRL on a stream, end to end on the scripted tiny model (the mechanics; learning itself is the
miniature's to show): each arrival answered by the weights as they stood, updates every B arrivals, and a
kill -9 that resumes with nothing answered twice."""

from __future__ import annotations

import json
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.run.test_stream import assert_prequential, updates
from testtime.core.ledger import read_entries


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_online_ttrl_learns_after_answering_and_resumes_after_kill(
    tmp_path: Path, interrupt_cli: Callable[..., Any], testtime_cli: Callable[..., Any], scripted_model: str
) -> None:
    out = tmp_path / "run"
    args = [
        "run", "--method", "ttrl", "--preset", "cpu", "--stream", "--bench", "arith", "--limit", "6",
        "--model", scripted_model,
        "--method-opt", "update_every=3", "--method-opt", "window=3", "--method-opt", "update_steps=1",
        "--out", str(out), "--quiet",
    ]  # fmt: skip
    results = out / "results.jsonl"
    killed = interrupt_cli(
        *args, sig=signal.SIGKILL, cwd=tmp_path, patience=900,
        when=lambda: results.exists() and len(results.read_text().splitlines()) >= 3,  # update 1 is due
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL
    resumed = testtime_cli("run", "--resume", str(out), "--quiet", timeout=1100)
    assert resumed.returncode == 0, resumed.stderr
    assert "stream resumed after 3 answered arrivals" in resumed.stderr
    assert "the update that was due ran now" in resumed.stderr
    answered = assert_prequential(out)
    # 3 prompts a rollout step, one optimiser step each (mini-batches of one prompt): 3 steps an update
    assert [r.answered_with.state for r in answered if r.answered_with] == [0, 0, 0, 3, 3, 3]
    assert [(u.state, u.arrivals, len(u.learned_from)) for u in updates(out)] == [(3, 3, 3), (6, 6, 3)]
    paid = Counter(e.problem_id for e in read_entries(out / "ledger.jsonl") if e.purpose == "solve" and not e.cached)
    assert set(paid.values()) == {8} and len(paid) == 6  # eval_samples each, none asked twice across the kill
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert [p["step"] for p in predictions] == [0, 0, 0, 3, 3, 3]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["prequential"]["learner"] == "weights" and summary["ledger"]["train_steps"] == 6
    assert len(summary["label_free"]["ttrl_majority_ratio"]) == 6
    # one set of weights kept: the last update's
    assert (out / "stream" / "update-2" / "ttrl" / "final" / "config.json").is_file()
    assert not (out / "stream" / "update-1" / "ttrl" / "final").exists()
    assert not list((out / "stream").glob("update-*/ttrl/checkpoints"))
