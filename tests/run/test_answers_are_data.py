"""Answers are data, never a reason to stop: a number past Python's 4,300-digit parse limit and a reply with a lone
surrogate (which UTF-8 cannot encode) are recorded like any other answer, through the vote, grading, the records
and a resume, over a real HTTP server; `recordable` holds for any string (a property test)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testtime.core.answers import answer_key, equivalent
from testtime.core.answers.vote import majority_vote
from testtime.core.jsonl import record_lines
from testtime.core.records import Completion, Message, Problem, recordable
from testtime.models.mock_server import MockChatServer

Cli = Callable[..., CompletedProcess[str]]
HUGE = "7" * 4301  # one digit past int()'s limit (sys.get_int_max_str_digits)


def test_a_number_past_the_parse_limit_has_a_key_and_compares() -> None:
    assert answer_key(HUGE) == HUGE
    assert equivalent(HUGE, f"+000{HUGE}.000")  # same value, other spelling: the canonical text is the same
    assert not equivalent(HUGE, HUGE[:-1] + "8")
    assert not equivalent(HUGE, "7")
    assert equivalent("0." + "5" + "0" * 4400, "1/2")  # long only in its zeros: an exact rational again
    assert answer_key(f"{HUGE}/3") == f"{HUGE}/3"  # a long fraction is kept as text
    assert not equivalent(f"{HUGE}/3", f"{HUGE}/7")


def test_the_vote_over_huge_numbers_counts_them() -> None:
    vote = majority_vote([HUGE, "12", f"{HUGE}.0", None])
    assert vote.answer == HUGE and vote.majority_ratio == 0.5


def test_long_expressions_are_not_evaluated() -> None:
    chain = "+".join(["1"] * 5000)  # a parse this deep would overflow the evaluator's recursion
    assert not equivalent(chain, "5000")
    assert equivalent(chain, chain)


@pytest.mark.parametrize(
    "text",
    ["\ud800", "a\udfffb", "\ud83d\ude00", "\u2028\u2029\x85", "nul\x00nul", "é" * 10, "\ud800" * 3 + "x"],
)
def test_recordable_makes_any_text_encodable_and_keeps_what_was(text: str) -> None:
    made = recordable(text)
    made.encode("utf-8")  # never raises
    assert recordable(made) == made
    if "\ud800" not in text and "\udfff" not in text and "\ud83d" not in text:
        assert made == text  # encodable text is untouched
    assert recordable("\ud83d\ude00") == "😀"  # a pair written as two escapes is its character


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec=None, exclude_categories=())))
def test_any_string_round_trips_through_a_record(text: str) -> None:
    completion = Completion(text=text, error=text)
    line = completion.model_dump_json()
    [only] = record_lines(line + "\n")  # one record, one line, whatever the text holds
    back = Completion.model_validate_json(only)
    assert back.text == back.error == recordable(text)
    Message(role="user", content=text).model_dump_json().encode("utf-8")
    Problem(id=text or "p", domain="text", statement=text).model_dump_json().encode("utf-8")


def test_ten_megabytes_of_reply_are_recorded() -> None:
    text = ("x\u2028\ud800" * 3_500_000)[:10_000_000]
    back = Completion.model_validate_json(Completion(text=text).model_dump_json())
    assert len(back.text) == 10_000_000 and "\ud800" not in back.text


def _run(testtime_cli: Cli, out: Path, reply: Callable[[list[dict[str, Any]]], str]) -> list[dict[str, Any]]:
    """Majority of 2 on 3 arith problems over a real HTTP server whose every reply is `reply`; then a resume."""
    with MockChatServer(reply=reply) as server:
        args = ("--model", "openai:m", "--api-base", server.url)
        done = testtime_cli("run", "--bench", "arith", "--limit", "3", "--n", "2", "--quiet", *args, "--out", str(out))
        assert done.returncode == 0, done.stderr
        asked = server.requests
        again = testtime_cli("run", "--resume", str(out), "--quiet", "--api-base", server.url)
        assert again.returncode == 0, again.stderr
        assert server.requests == asked == 6  # nothing paid twice: every sample reached the cache and ledger
    ledger = [json.loads(line) for line in record_lines((out / "ledger.jsonl").read_text(encoding="utf-8"))]
    assert len(ledger) == 6 and not any(e.get("cached") or e.get("error") for e in ledger)
    return [json.loads(line) for line in record_lines((out / "results.jsonl").read_text(encoding="utf-8"))]


def test_a_4301_digit_answer_finishes_the_run(testtime_cli: Cli, tmp_path: Path) -> None:
    results = _run(testtime_cli, tmp_path / "run", lambda messages: f"It is \\boxed{{{HUGE}}}.")
    assert len(results) == 3 and all(r["prediction"] == HUGE and r["correct"] is False for r in results)


def test_a_lone_surrogate_in_a_reply_finishes_the_run(testtime_cli: Cli, tmp_path: Path) -> None:
    results = _run(testtime_cli, tmp_path / "run", lambda messages: "so \ud800 it is \\boxed{4}")
    assert len(results) == 3 and all(r["prediction"] == "4" for r in results)
    assert all("\ufffd" in c["text"] for r in results for c in r["candidates"])


def test_grade_takes_a_4301_digit_prediction_and_label(testtime_cli: Cli, tmp_path: Path) -> None:
    data = tmp_path / "mine.jsonl"
    data.write_text(json.dumps({"id": "q1", "problem": "Big?", "answer": HUGE}) + "\n")
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text(json.dumps({"id": "q1", "prediction": f"\\boxed{{{HUGE}}}"}) + "\n")
    graded = testtime_cli("grade", "--bench", str(data), "--predictions", str(predictions), "--json")
    assert graded.returncode == 0, graded.stderr
    assert json.loads(graded.stdout)["accuracy"] == 1.0
