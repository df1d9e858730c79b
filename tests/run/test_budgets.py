"""Budgets stop every method: a call checks the budget when it takes its slot, so the overshoot is at most the
calls in flight, whatever is queued behind them; the stop names the budget and a resume with more continues
without paying twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from testtime.core.ledger import read_entries
from testtime.run import lifecycle
from testtime.run.execute import execute
from testtime.run.settings import ResumeChanges, RunSettings

CONCURRENCY = 4


def _settings(method: str, **extra: object) -> RunSettings:
    options = {"n": 8} if method == "majority" else {}
    return RunSettings(
        method=method,
        bench="arith",
        model="fake:echo,latency=0.02",
        limit=30,
        concurrency=CONCURRENCY,
        **options,  # type: ignore[arg-type]
        **extra,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("method", ["majority", "single"])
def test_a_token_budget_stops_within_the_calls_in_flight(tmp_path: Path, method: str) -> None:
    budget = 600
    summary = execute(lifecycle.create(_settings(method, max_tokens_total=budget), tmp_path / "run"))
    paid = [e for e in read_entries(tmp_path / "run" / "ledger.jsonl") if not e.cached]
    largest = max(e.prompt_tokens + e.completion_tokens for e in paid)
    assert summary.stopped is not None and summary.stopped.startswith("token budget reached")
    # the message gives the final spend, the calls in flight when the stop fired included
    assert f"{summary.ledger.tokens:,} spent of {budget:,}" in summary.stopped
    assert not summary.complete
    assert budget <= summary.ledger.tokens <= budget + CONCURRENCY * largest  # at most the calls in flight over
    assert len(paid) < (30 * 8 if method == "majority" else 30)  # the queued samples were never sent

    resumed = execute(lifecycle.resume(tmp_path / "run", ResumeChanges(max_tokens_total=10**7)))
    assert resumed.complete and resumed.stopped is None and resumed.problems == 30
    calls = [e for e in read_entries(tmp_path / "run" / "ledger.jsonl") if not e.cached]
    assert len(calls) == (30 * 8 if method == "majority" else 30)  # nothing paid twice across the stop


def test_a_problem_finished_in_flight_is_kept_when_the_budget_runs_out(tmp_path: Path) -> None:
    summary = execute(lifecycle.create(_settings("majority", max_tokens_total=2_000), tmp_path / "run"))
    assert summary.stopped is not None and 0 < summary.problems < 30
    # every paid call that finished a problem is in a saved result; none was lost with the stop
    paid_problems = {e.problem_id for e in read_entries(tmp_path / "run" / "ledger.jsonl") if not e.cached}
    assert summary.problems <= len(paid_problems)
