"""Cache, ledger and run directory survive what a kill -9 leaves behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testtime.core.cache import CompletionCache, cache_key
from testtime.core.checkpoint import RoundCheckpoints
from testtime.core.errors import UserError
from testtime.core.ledger import Ledger, LedgerEntry, read_entries
from testtime.core.records import Completion, Message, SamplingParams
from testtime.core.results import ResultRecord, TTRLStep, read_steps
from testtime.methods.ttrl.monitor import LabelHistory
from testtime.methods.ttrl.trl_reward import append_step, resume_steps
from testtime.run.directory import RunDir

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


@pytest.mark.parametrize("kind", ["ledger", "rounds", "steps"])
def test_an_entry_after_a_torn_line_is_not_glued_to_it(tmp_path: Path, kind: str) -> None:
    """A kill -9 mid-write leaves half a line; the next process must not append onto it (and lose both)."""
    path = tmp_path / f"{kind}.jsonl"
    if kind == "ledger":
        Ledger(path).record(LedgerEntry(prompt_tokens=1, attempts=1))
    elif kind == "rounds":
        RoundCheckpoints(path).append("p", 1, {"state": {}})
    else:
        path.write_text(TTRLStep(step=1).model_dump_json() + "\n")
    with path.open("a") as f:
        f.write('{"half": "a rec')
    if kind == "ledger":
        after = Ledger(path)
        after.record(LedgerEntry(prompt_tokens=2, attempts=1))
        after.close()
        assert [e.prompt_tokens for e in read_entries(path)] == [1, 2]
    elif kind == "rounds":
        RoundCheckpoints(path).append("p", 2, {"state": {}})
        assert [e["round"] for e in RoundCheckpoints(path).rounds("p")] == [1, 2]
    else:
        assert resume_steps(path, LabelHistory()) == 1
        append_step(path, TTRLStep(step=2))
        assert [r.step for r in read_steps(path)] == [1, 2]
    assert all(line.startswith("{") and line.endswith("}") for line in path.read_text().splitlines())


def test_unknown_price_is_not_reported_as_zero() -> None:
    ledger = Ledger()
    ledger.record(LedgerEntry(cost_usd=None))
    assert ledger.totals.cost_known is False


def _record(problem_id: str) -> ResultRecord:
    return ResultRecord(problem_id=problem_id, prediction="1", correct=True, graded_answer="1", status="correct")


def test_results_tolerate_only_a_torn_last_line(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run")
    run.append_result(_record("a"))
    with run.results_path.open("a") as f:
        f.write('{"problem_id": "b", "predi')
    assert [r.problem_id for r in run.read_results()] == ["a"]
    with run.results_path.open("a") as f:
        f.write("\n" + _record("c").model_dump_json() + "\n")
    with pytest.raises(UserError, match=r"results\.jsonl:2"):
        run.read_results()


def test_results_of_runs_written_before_records_were_typed_still_read(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run")
    old = {
        "problem_id": "a",
        "prediction": "4",
        "candidates": [],
        "selection": {"index": 0, "answer": "4", "rule": "exclusivity(support)", "evidence": {"rejected": ["5"]}},
        "details": {"rounds": [{"round": 1, "selected_answer": "4", "candidates": [{"index": 0, "answer": "4"}]}]},
        "correct": True,
        "graded_answer": "4",
        "status": "correct",
        "sample_correct": [],
        "sample_status": [],
    }
    run.config_path.write_text(json.dumps({"run": {"method": "trt", "bench": "arith", "model": "fake:"}}))  # schema 1
    run.results_path.write_text(json.dumps(old) + "\n")
    [record] = run.read_results()
    assert record.rounds[0].selected_answer == "4"
    assert record.selection is not None and record.selection.evidence is not None
    assert record.selection.evidence.kind == "exclusivity"


def test_run_dir_refuses_to_overwrite_a_run(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run")
    run.config_path.write_text("{}")
    with pytest.raises(UserError, match="--resume"):
        RunDir.create(tmp_path / "run")
