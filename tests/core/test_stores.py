"""Cache, ledger and run directory survive what a kill -9 leaves behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from testtime.core.cache import CompletionCache, cache_key
from testtime.core.errors import UserError
from testtime.core.ledger import Ledger, LedgerEntry
from testtime.core.records import Completion, Message, SamplingParams
from testtime.core.rundir import RunDir

PROMPT = [Message(role="user", content="hi")]


def test_cache_key_depends_on_every_part() -> None:
    base = cache_key("m", PROMPT, SamplingParams(seed=1), 0)
    assert base != cache_key("m2", PROMPT, SamplingParams(seed=1), 0)
    assert base != cache_key("m", PROMPT, SamplingParams(seed=2), 0)
    assert base != cache_key("m", PROMPT, SamplingParams(seed=1, temperature=0.1), 0)
    assert base != cache_key("m", PROMPT, SamplingParams(seed=1), 1)
    assert base != cache_key("m", [Message(role="user", content="ho")], SamplingParams(seed=1), 0)


def test_cache_persists_across_processes(tmp_path: Path) -> None:
    first = CompletionCache(tmp_path / "c.sqlite")
    first.put("k", Completion(text="hello"))
    first.close()
    assert CompletionCache(tmp_path / "c.sqlite").get("k") == Completion(text="hello")


def test_ledger_reloads_totals_and_skips_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(path)
    ledger.record(LedgerEntry(prompt_tokens=10, completion_tokens=5, cost_usd=0.01, attempts=1))
    ledger.record(LedgerEntry(cached=True))
    ledger.close()
    with path.open("a") as f:
        f.write('{"kind": "model_call", "prompt_tok')  # what a kill -9 mid-write leaves
    again = Ledger(path)
    assert (again.totals.calls, again.totals.cache_hits, again.totals.tokens) == (1, 1, 15)
    assert again.totals.cost_usd == pytest.approx(0.01)


def test_unknown_price_is_not_reported_as_zero() -> None:
    ledger = Ledger()
    ledger.record(LedgerEntry(cost_usd=None))
    assert ledger.totals.cost_known is False


def test_results_tolerate_only_a_torn_last_line(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run")
    run.append_result({"problem_id": "a"})
    with run.results_path.open("a") as f:
        f.write('{"problem_id": "b", "predi')
    assert [r["problem_id"] for r in run.read_results()] == ["a"]
    with run.results_path.open("a") as f:
        f.write('\n{"problem_id": "c"}\n')
    with pytest.raises(UserError, match=r"results\.jsonl:2"):
        run.read_results()


def test_run_dir_refuses_to_overwrite_a_run(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run")
    run.write_config({"run": {}})
    with pytest.raises(UserError, match="--resume"):
        RunDir.create(tmp_path / "run")
