"""Streams (`--stream`, `--bench -`): each arrival answered with the state as it stood, before anything was
learned from it; shared memory with provenance; standard input with bad lines; kill -9 and resume."""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testtime.core.ledger import read_entries
from testtime.core.results import ResultRecord, StreamUpdate
from testtime.models.mock_server import CARRY_LESSON, MockChatServer, carry_lesson_reply


def records(run: Path) -> list[ResultRecord]:
    return [ResultRecord.model_validate_json(line) for line in (run / "results.jsonl").read_text().splitlines()]


def updates(run: Path) -> list[StreamUpdate]:
    path = run / "stream" / "updates.jsonl"
    return [StreamUpdate.model_validate_json(line) for line in path.read_text().splitlines()] if path.exists() else []


def assert_prequential(run: Path) -> list[ResultRecord]:
    """The invariant, checked from the records alone: no answer came from a state that learned from its problem,
    arrivals are answered once each, in order, and the state never goes back."""
    answered = records(run)
    assert [r.answered_with.arrival for r in answered if r.answered_with] == list(range(len(answered)))
    states = [r.answered_with.state for r in answered if r.answered_with]
    assert states == sorted(states)
    for record in answered:
        assert record.answered_with is not None
        learned = {p for u in updates(run) if u.state <= record.answered_with.state for p in u.learned_from}
        assert record.problem_id not in learned
        made_after = [u for u in updates(run) if u.state <= record.answered_with.state]
        assert all(u.arrivals <= record.answered_with.arrival for u in made_after)
    return answered


def trt_stream(server: MockChatServer, out: Path, memory: str, *extra: str) -> list[str]:
    return [
        "run", "--method", "trt", "-T", "1", "-K", "2", "--method-opt", f"memory={memory}", "--stream",
        "--bench", "arith", "--limit", "5", "--model", "openai:scripted", "--api-base", server.url,
        "--out", str(out), "--quiet", *extra,
    ]  # fmt: skip


def test_shared_memory_carries_a_lesson_to_later_problems_with_its_provenance(testtime_cli, tmp_path: Path) -> None:
    with MockChatServer(reply=carry_lesson_reply) as server:
        alone = testtime_cli(*trt_stream(server, tmp_path / "problem", "problem"))
        assert alone.returncode == 0, alone.stderr
        assert not any("earlier problems" in json.dumps(b) for b in server.bodies)
        shared = testtime_cli(*trt_stream(server, tmp_path / "shared", "shared"))
        assert shared.returncode == 0, shared.stderr
    answered = assert_prequential(tmp_path / "shared")
    # One round with no lesson of its own: every problem alone is wrong; shared, every problem after the first
    # meets the lesson problem 0's reflection distilled.
    assert [r.correct for r in records(tmp_path / "problem")] == [False] * 5
    assert [r.correct for r in answered] == [False, True, True, True, True]
    assert [r.answered_with.state for r in answered if r.answered_with] == [0, 1, 1, 1, 1]
    memory = json.loads((tmp_path / "shared" / "stream" / "memory.json").read_text())
    [item] = memory["items"]
    assert (item["taught_by"], item["arrival"], item["uses"], item["text"]) == (
        answered[0].problem_id,
        0,
        4,
        CARRY_LESSON,
    )
    assert [r.answered_with.memory for r in answered if r.answered_with] == [(), (1,), (1,), (1,), (1,)]
    assert [u.learned_from for u in updates(tmp_path / "shared")] == [(answered[0].problem_id,)]
    summary = json.loads((tmp_path / "shared" / "summary.json").read_text())["prequential"]
    assert summary["learner"] == "memory" and summary["accuracy"]["mean"] == 0.8 and summary["final_state"] == 1
    assert summary["running_accuracy"] == [0.0, 0.5, 2 / 3, 0.75, 0.8]

    report = testtime_cli("report", str(tmp_path / "problem"), str(tmp_path / "shared"), "--out", str(tmp_path / "r"))
    assert report.returncode == 0, report.stderr
    rows = json.loads((tmp_path / "r" / "report.json").read_text())["runs"]
    assert [row["prequential"]["accuracy"]["mean"] for row in rows] == [0.0, 0.8]
    assert (tmp_path / "r" / "prequential.png").stat().st_size > 0 and "trt (stream)" in report.stdout


def test_a_killed_stream_resumes_with_the_state_each_arrival_would_have_met(
    testtime_cli, interrupt_cli: Callable[..., Any], tmp_path: Path
) -> None:
    with MockChatServer(reply=carry_lesson_reply) as server:
        whole = testtime_cli(*trt_stream(server, tmp_path / "whole", "shared"))
        assert whole.returncode == 0, whole.stderr
    with MockChatServer(reply=carry_lesson_reply, latency_s=0.3) as server:
        out = tmp_path / "killed"
        results = out / "results.jsonl"
        killed = interrupt_cli(
            *trt_stream(server, out, "shared"), sig=signal.SIGKILL, cwd=tmp_path,
            when=lambda: results.exists() and len(results.read_text().splitlines()) >= 2,
        )  # fmt: skip
        assert killed.returncode == -signal.SIGKILL
        resumed = testtime_cli("run", "--resume", str(out), "--quiet")
        assert resumed.returncode == 0, resumed.stderr
        assert "stream resumed after" in resumed.stderr and "none is answered again" in resumed.stderr
        paid = [e for e in read_entries(out / "ledger.jsonl") if not e.cached]
        # kill -9 may lose the answers in flight (at most the K=2 rollouts of one round); nothing else is asked twice
        assert 0 <= server.completed - len(paid) <= 2
    assert len(paid) == len([e for e in read_entries(tmp_path / "whole" / "ledger.jsonl") if not e.cached])
    uninterrupted, after_kill = assert_prequential(tmp_path / "whole"), assert_prequential(out)
    assert [(r.problem_id, r.answered_with, r.prediction) for r in after_kill] == [
        (r.problem_id, r.answered_with, r.prediction) for r in uninterrupted
    ]
    assert (out / "stream" / "memory.json").read_text() == (tmp_path / "whole" / "stream" / "memory.json").read_text()
    assert updates(out) == [u.model_copy(update={"seconds": u.seconds}) for u in updates(tmp_path / "whole")]


@pytest.mark.parametrize("locale", ["C.UTF-8", "C"])
def test_an_invalid_utf8_byte_on_stdin_costs_its_line_only(tmp_path: Path, locale: str) -> None:
    """It used to end in a traceback (C.UTF-8) or a stream that hung with no answers (a strict locale)."""
    stream = b'{"id": "a", "question": "What is 2 + 3?", "answer": "3"}\n{"id": "b", "question": "caf\xe9 4?"}\n'
    stream += b'{"id": "c", "question": "What is 1 + 5?", "answer": "5"}\n'
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "testtime.cli", "run", "--bench", "-", "--model", "fake:", "--n", "1", "--out", str(out),
         "--quiet"],
        input=stream, capture_output=True, timeout=120, cwd=tmp_path, env={**os.environ, "LC_ALL": locale},
    )  # fmt: skip
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0 and "Traceback" not in stderr, stderr
    assert "stdin:2: not valid UTF-8 (byte 0xe9 at column 29)" in stderr
    assert [r.problem_id for r in records(out)] == ["a", "c"]


def test_a_stream_from_stdin_reports_each_bad_line_and_goes_on(tmp_path: Path) -> None:
    lines = [
        '{"id": "a", "question": "What is 2 + 3?", "answer": "3"}',  # fake:echo boxes the last number: right
        "{not json",
        '{"id": "a", "question": "What is 4 + 4?"}',  # the id arrived before
        '{"id": "b", "prompt": "What is 7 + 1?"}',  # unlabelled: answered, not graded
        '{"id": "c"}',  # no problem
        "[1, 2]",
        "",
        '{"id": "d", "question": "What is 5 + 5?", "answer": "7"}',
    ]
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "testtime.cli", "run", "--bench", "-", "--model", "fake:", "--n", "2", "--out", str(out),
         "--quiet"],
        input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    for number in (2, 3, 5, 6):
        assert len(re.findall(rf"^stdin:{number}: ", done.stderr, re.MULTILINE)) == 1, done.stderr
    assert "arrived before" in done.stderr and "not valid JSON" in done.stderr and "no problem column" in done.stderr
    answered = assert_prequential(out)
    assert [(r.problem_id, r.correct) for r in answered] == [("a", True), ("b", None), ("d", False)]
    rejected = (out / "stream" / "rejected.jsonl").read_text().splitlines()
    assert [json.loads(line)["where"] for line in rejected] == ["stdin:2", "stdin:3", "stdin:5", "stdin:6"]
    assert json.loads((out / "config.json").read_text())["kind"] == "stream"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["labelled"] == 2 and summary["unlabelled"] == 1
    assert summary["prequential"]["order"] == "stdin" and summary["prequential"]["running_accuracy"] == [1.0, 1.0, 0.5]

    replayed = subprocess.run(  # the recorded arrivals, in order, from the cache: standard input is not read again
        [sys.executable, "-m", "testtime.cli", "run", "--replay", str(out), "--quiet"],
        input="", capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr
    [again] = list(out.glob("replay-*"))
    assert [(r.problem_id, r.correct, r.answered_with) for r in records(again)] == [
        (r.problem_id, r.correct, r.answered_with) for r in answered
    ]


def test_a_shuffled_stream_is_seeded(testtime_cli, tmp_path: Path) -> None:
    orders = []
    for name, seed in (("one", "1"), ("again", "1"), ("other", "2")):
        args = ["--stream", "--shuffle", "--seed", seed, "--bench", "arith", "--limit", "8", "--model", "fake:"]
        done = testtime_cli("run", *args, "--n", "1", "--out", str(tmp_path / name), "--quiet")
        assert done.returncode == 0, done.stderr
        orders.append([r.problem_id for r in assert_prequential(tmp_path / name)])
    assert orders[0] == orders[1] != orders[2]
    assert sorted(orders[0]) == sorted(orders[2]) and orders[0] != sorted(
        orders[0], key=lambda p: int(p.split("-")[-1])
    )


def test_stream_options_out_of_place_are_one_line_errors(testtime_cli, tmp_path: Path) -> None:
    cases = {
        ("--shuffle",): "--shuffle orders a stream: add --stream",
        ("--method", "trt", "--method-opt", "memory=shared"): "memory=shared carries lessons",
        ("--method", "trt", "--method-opt", "memory=shared", "--stream", "--no-knowledge"): "it needs --knowledge",
    }
    for args, message in cases.items():
        done = testtime_cli("run", "--bench", "arith", "--model", "fake:", "--out", str(tmp_path / "x"), *args)
        assert done.returncode != 0 and message in done.stderr, done.stderr
        assert "Traceback" not in done.stderr and not (tmp_path / "x").exists()


def stdin_stream(out: Path, *lines: str, resume: bool = False) -> subprocess.CompletedProcess[str]:
    """`testtime run --bench -` (or `--resume OUT`) with `lines` on standard input, in a process of its own."""
    where = ["--resume", str(out)] if resume else ["--bench", "-", "--model", "fake:", "--n", "1", "--out", str(out)]
    return subprocess.run(
        [sys.executable, "-m", "testtime.cli", "run", *where, "--quiet"],
        input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120, cwd=out.parent,
    )  # fmt: skip


def test_lines_torn_by_a_kill_are_dropped_before_the_stream_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "run"

    stream = functools.partial(stdin_stream, out)

    assert stream('{"id": "a", "question": "What is 1 + 1?", "answer": "1"}').returncode == 0
    for torn in (out / "problems.jsonl", out / "stream" / "labels.jsonl"):
        with torn.open("a") as f:
            f.write('{"id": "b", "statem')  # a kill -9 mid-write
    done = stream('{"id": "c", "question": "What is 2 + 2?", "answer": "2"}', resume=True)
    assert done.returncode == 0, done.stderr
    assert [(r.problem_id, r.correct) for r in assert_prequential(out)] == [("a", True), ("c", True)]
    for path in (out / "problems.jsonl", out / "stream" / "labels.jsonl"):
        assert [json.loads(line)["id" if path.name == "problems.jsonl" else "problem_id"] for line in
                path.read_text().splitlines()] == ["a", "c"]  # fmt: skip


def test_a_resumed_stdin_stream_names_the_lines_of_its_own_input(tmp_path: Path) -> None:
    """Lines are counted from 1 in each input (a resumed stream's line 1 was reported as "stdin:4"); a line
    without an id is still named by its place in the whole stream, so no two lifetimes share an id."""
    out = tmp_path / "run"

    stream = functools.partial(stdin_stream, out)

    first = stream('{"question": "What is 1 + 1?"}', "", '{"question": "What is 2 + 2?"}', "{bad")
    assert first.returncode == 0 and "stdin:4: not valid JSON" in first.stderr, first.stderr
    again = stream("{bad", '{"question": "What is 3 + 3?"}', resume=True)
    assert again.returncode == 0 and "stdin:1: not valid JSON" in again.stderr, again.stderr
    ids = [json.loads(line)["id"] for line in (out / "problems.jsonl").read_text().splitlines()]
    assert len(ids) == len(set(ids)) == 3


def test_a_stream_stopped_by_its_budget_resumes_at_the_arrival_it_stopped_on(testtime_cli, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["--stream", "--limit", "6", "--model", "fake:", "--n", "2", "--quiet"]
    stopped = testtime_cli("run", *args, "--max-tokens-total", "150", "--out", str(out))
    assert stopped.returncode == 4 and "stopped:" in stopped.stderr
    first = len(records(out))
    assert 0 < first < 6 and not json.loads((out / "summary.json").read_text())["complete"]
    resumed = testtime_cli("run", "--resume", str(out), "--max-tokens-total", "100000", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert len(assert_prequential(out)) == 6 and json.loads((out / "summary.json").read_text())["complete"]
    paid = [e for e in read_entries(out / "ledger.jsonl") if not e.cached]
    assert len(paid) == 6 * 2  # the arrival the budget stopped on was asked once, then finished from the cache


def test_a_resumed_learner_rebuilds_from_ungraded_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """results.jsonl holds each answer beside its grade; what a learner's `restore` is handed is exactly a
    `ProblemResult` (the type has no grade), so no learner can read a label, by construction."""
    from testtime.cli import main
    from testtime.core.results import ProblemResult
    from testtime.methods.learner import NoAdaptation

    handed: list[object] = []

    async def spy(self: object, answered: Any, updates: Any) -> tuple[str, list[StreamUpdate]]:
        handed.extend(result for _, result in answered)
        return "", []

    monkeypatch.setattr(NoAdaptation, "restore", spy)
    out = tmp_path / "run"
    args = ["--stream", "--limit", "6", "--model", "fake:", "--n", "2", "--quiet"]
    with pytest.raises(SystemExit) as stopped:  # by its budget, part way
        main(["run", *args, "--max-tokens-total", "150", "--out", str(out)])
    first = records(out)
    assert stopped.value.code == 4 and 0 < len(first) < 6 and all(r.correct is not None for r in first)
    with pytest.raises(SystemExit) as resumed:
        main(["run", "--resume", str(out), "--max-tokens-total", "100000", "--quiet"])
    assert resumed.value.code == 0 and len(handed) == len(first)
    assert all(type(result) is ProblemResult and not hasattr(result, "correct") for result in handed)
