"""TRT as users run it: kill -9 and resume, budgets, code problems in the sandbox, the API path."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testtime.core.ledger import read_entries
from testtime.models.mock_server import MockChatServer


def test_kill_9_mid_run_then_resume_finishes_every_round(
    tmp_path: Path, testtime_cli: Callable[..., Any], interrupt_cli: Callable[..., Any]
) -> None:
    out = tmp_path / "run"
    rounds = out / "rounds.jsonl"
    args = "run --method trt --bench arith --limit 6 -T 3 -K 2 --concurrency 4 --quiet".split()
    interrupt_cli(
        *args,
        "--out",
        str(out),
        "--model",
        "fake:echo,latency=0.05",
        when=lambda: rounds.exists() and len(rounds.read_text().splitlines()) >= 10,
        sig=signal.SIGKILL,
        cwd=tmp_path,
    )
    finished_before = len(rounds.read_text().splitlines())
    assert 0 < finished_before < 6 * 4, "the run must be killed mid-way for this test to mean anything"
    result = testtime_cli("run", "--resume", str(out), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    entries = [json.loads(line) for line in rounds.read_text().splitlines()]
    per_problem: dict[str, list[int]] = {}
    for entry in entries:
        per_problem.setdefault(entry["problem_id"], []).append(entry["round"])
    assert all(sorted(r) == [0, 1, 2, 3] for r in per_problem.values()) and len(per_problem) == 6
    paid = [e for e in read_entries(out / "ledger.jsonl") if not e.cached]
    assert len(paid) <= 6 * (1 + 3 * 3)  # never more than the run needs: no call paid twice
    summary = json.loads((out / "summary.json").read_text())
    assert summary["complete"] and len(summary["rounds"]["accuracy"]) == 3


def test_token_budget_stops_cleanly_and_resumes(tmp_path: Path, testtime_cli: Callable[..., Any]) -> None:
    out = tmp_path / "run"
    base = [
        *"run --method trt --bench arith --limit 4 -T 2 -K 2 --concurrency 1 --quiet".split(),
        "--model",
        "fake:echo",
    ]
    stopped = testtime_cli(*base, "--max-tokens-total", "300", "--out", str(out), cwd=tmp_path)
    assert stopped.returncode == 4, stopped.stderr  # stopped by its budget, not finished
    assert "stopped: token budget reached" in stopped.stderr and f"--resume {out}" in stopped.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert not summary["complete"] and summary["stopped"].startswith("token budget")
    resumed = testtime_cli("run", "--resume", str(out), "--max-tokens-total", "100000", "--quiet", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((out / "summary.json").read_text())["complete"]


def test_trt_on_code_counts_calls_and_runs_in_the_sandbox(
    tmp_path: Path, shared_data: Path, testtime_cli: Callable[..., Any], open_sandbox_or_skip: object
) -> None:
    responses = tmp_path / "responses.json"
    # One scripted reply cycles through every call; it holds a program and a JSON list, so it serves as a
    # solver answer, a list of test inputs and a (malformed) reflection alike.
    responses.write_text(
        json.dumps(
            [
                '["1 2", "3 4"]\n```python\na, b = map(int, input().split())\nprint(a + b)\n```',
                '["5 5"]\n```python\nprint(2)\n```',
            ]
        )
    )
    out = tmp_path / "run"
    args = "run --method trt --bench lcb-v6 --limit 2 -T 2 -K 2 --platform atcoder --quiet".split()
    result = testtime_cli(
        *args, "--model", f"fake:file:{responses}", "--data-dir", str(shared_data), "--out", str(out), cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["calls_per_problem"] == 1 + 2 * (2 + 2)  # strategies + T·(K solvers + tests + reflection)
    assert summary["ledger"]["sandbox_seconds"] > 0 and len(summary["rounds"]["coverage"]) == 2


def test_trt_through_litellm_against_a_local_server(tmp_path: Path, testtime_cli: Callable[..., Any]) -> None:
    with MockChatServer(faults={3: 429, 7: 500}) as server:
        args = "run --method trt --bench arith --limit 2 -T 2 -K 2 --quiet --model litellm:openai/mock".split()
        result = testtime_cli(*args, "--api-base", server.url, "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["ledger"]["calls"] == 2 * (1 + 2 * 3) and summary["ledger"]["retries"] == 2
    assert summary["ledger"]["errors"] == 0 and summary["complete"]


def test_code_reflection_sees_each_attempts_outputs_and_whether_they_agree(
    tmp_path: Path, testtime_cli: Callable[..., Any], open_sandbox_or_skip: object
) -> None:
    """Two programs pass the public example and run cleanly on every model-written input, but print different
    things on two of three: the reflection must be told so, per attempt, not "pass, pass, pass"."""
    public = json.dumps([{"input": "2\n", "output": "4\n", "testtype": "stdin"}])
    problems = tmp_path / "code.jsonl"
    problems.write_text(json.dumps({"id": "twice", "question": "Print twice n.", "public_tests": public}) + "\n")
    right = "```python\nprint(2 * int(input()))\n```"
    wrong = "```python\nn = int(input())\nprint(2 * n if n < 4 else n + 4)\n```"  # wrong from 4 on
    programs = [right, wrong]
    solved = iter(range(100))
    reflections: list[str] = []

    def reply(messages: list[dict[str, Any]]) -> str:
        prompt = messages[-1]["content"]
        if "You are writing unit tests" in prompt:  # TRT's default on code: tests with expected outputs
            tests = [("3\n", "6"), ("5\n", "10"), ("7\n", "14")]  # both print 6 on 3; 10 / 9, 14 / 11
            return json.dumps([{"input": i, "output": o} for i, o in tests])
        if "You are improving a solver" in prompt:
            reflections.append(prompt)
            return json.dumps({"insights": []})
        return programs[next(solved) % 2]

    with MockChatServer(reply=reply) as server:
        args = "run --method trt -T 1 -K 2 --no-strategies --quiet --model openai:mock".split()
        done = testtime_cli(
            *args, "--bench", str(problems), "--api-base", server.url, "--out", str(tmp_path / "run"), cwd=tmp_path
        )
    assert done.returncode == 0, done.stderr
    [prompt] = reflections
    runs = prompt.split("### Test runs")[1].split("###")[0]
    lines = [line for line in runs.splitlines() if line.startswith("attempt ")]
    assert len(lines) == 2 and "(selected)" in lines[0]
    assert all("public examples 1/1 pass" in line for line in lines)
    chosen, other = ("'10'", "'9'") if "input 2: '10'" in lines[0] else ("'9'", "'10'")
    assert f"input 2: {chosen}" in lines[0] and f"input 2: {other}" in lines[1]
    assert "(differs from selected)" in lines[1]
    assert "(not the expected output)" in lines[1] and "(not the expected output)" not in lines[0]
    assert "input 1: '6' (agrees with selected)" in lines[1]
    assert lines[1].count("(differs from selected)") == 2 and lines[1].count("(agrees with selected)") == 1
    indices = [line.split(":")[0].split()[1] for line in lines]
    assert all(f"[attempt {i}]" in prompt for i in indices)  # the attempts' texts carry the same indices


@pytest.mark.parametrize("rank", ["tests_passed", "matrix"])
def test_trt_on_pyfunc_counts_a_written_float_output_as_the_grader_does(
    tmp_path: Path, testtime_cli: Callable[..., Any], open_sandbox_or_skip: object, rank: str
) -> None:
    """`sub_0(a, b)`: two wrong programs that agree (they pass the public example) and one right one. The unit
    tests' expected outputs are the right values written as floats (`99.0`): the grader's equality counts them
    for the right program, which wins on tests passed; by the output's text nobody passed them, and the wrong
    majority won. rank=matrix (the code × test matrix) chooses the same, and records its matrix every round."""
    right = "```python\ndef sub_0(a, b):\n    return a - b\n```"
    wrong = "```python\ndef sub_0(a, b):\n    return a - b if a < 50 else 0\n```"
    wrong_too = "```python\ndef sub_0(a, b):\n    return (a - b) if a < 50 else 0\n```"
    programs = iter([wrong, wrong_too, right] * 10)

    def reply(messages: list[dict[str, Any]]) -> str:
        prompt = messages[-1]["content"]
        if "You are writing unit tests" in prompt:
            tests = [("100\n1", "99.0"), ("70\n5", "65.0"), ("1\n3", "-2.0")]
            return json.dumps([{"input": i, "output": o} for i, o in tests])
        if "You are improving a solver" in prompt:
            return json.dumps({"insights": []})
        return next(programs)

    out = tmp_path / "run"
    with MockChatServer(reply=reply) as server:
        args = "run --method trt -T 1 -K 3 --no-strategies --quiet --model openai:mock --concurrency 1".split()
        done = testtime_cli(*args, "--bench", "pyfunc", "--bench-opt", "level=1", "--limit", "1",
                            "--selector-opt", f"rank={rank}", "--api-base", server.url, "--out", str(out),
                            cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    [record] = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    chosen = next(c for c in record["candidates"] if c["index"] == record["selection"]["index"])
    assert "return a - b\n" in chosen["text"] and record["correct"] is True
    passed = {c["index"]: c["tests_passed"] for c in record["selection"]["evidence"]["candidates"]}
    # the public example, then the two written tests that are not its copy
    assert passed[chosen["index"]] == 3 and sorted(passed.values()) == [1, 1, 3]
    for round_record in record["rounds"]:  # the matrix, candidates × tests, every round (rank=matrix only)
        matrix = round_record["selection"]["evidence"]["matrix"]
        assert (matrix is not None) == (rank == "matrix")
        if matrix is not None:
            assert len(matrix["passes"]) == len(matrix["candidates"]) and len(matrix["tests"]) == 3
