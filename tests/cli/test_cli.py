"""`testtime run / grade / list` as a user runs them: end to end on the fake model, resume after kill -9,
replay with zero calls, bad input as one clear line, and a light import."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import write_jsonl
from testtime.core.ledger import read_entries

SCRATCH = Path(tempfile.mkdtemp(prefix="testtime-cli-"))  # cwd of every command: ./runs lands here


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "testtime.cli", *args], capture_output=True, text=True, timeout=timeout, cwd=SCRATCH
    )


def test_majority_run_end_to_end_on_the_fake_model(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = "run --method majority --bench arith --limit 5 --n 4 --model fake:echo --quiet".split()
    result = cli(*args, "--out", str(out))
    assert result.returncode == 0, result.stderr
    config = json.loads((out / "config.json").read_text())
    assert config["run"]["method"] == "majority"
    assert config["method"]["selector"] == {  # recorded as built, every option
        "name": "majority",
        "tie_policy": "earliest",
        "weight": "count",
        "keep": 1.0,
    }
    assert "python" in config["versions"] and config["benchmark"]["digits"] == 2
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 5 and all(len(r["candidates"]) == 4 for r in records)
    summary = json.loads((out / "summary.json").read_text())
    # fake:echo boxes the last number of the question ("What is a + b?" → b): wrong on every problem
    assert summary["accuracy"]["mean"] == 0.0 and summary["ledger"]["calls"] == 20
    assert summary["maj@k"].keys() == {"1", "2", "4"} and summary["complete"] is True
    said = result.stdout + result.stderr
    assert f" view {out}" in said and f" report {out} [OTHER RUNS...]" in said  # what to do next


def test_the_printed_next_steps_run_as_written_where_testtime_is_not_on_path(tmp_path: Path) -> None:
    import os
    import shlex

    out = tmp_path / "run"
    bare = {**os.environ, "PATH": "/usr/bin:/bin"}  # as after scripts/install: .venv/bin is not on PATH
    command = [str(Path(sys.executable).parent / "testtime"), "run", "--model", "fake:echo", "--limit", "2"]
    ran = subprocess.run([*command, "--out", str(out)], capture_output=True, text=True, env=bare, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    hint = next(line for line in (ran.stdout + ran.stderr).splitlines() if " report " in line)
    report = shlex.split(hint.strip().split("(")[0].replace("[OTHER RUNS...]", ""))
    assert report[0] != "testtime" and report[1:] == ["report", str(out)]
    again = subprocess.run(report, capture_output=True, text=True, env=bare, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "majority" in again.stdout


def test_single_greedy_is_one_call_per_problem(tmp_path: Path) -> None:
    result = cli(
        "run",
        "--method",
        "single",
        "--bench",
        "arith",
        "--limit",
        "3",
        "--temperature",
        "0",
        "--model",
        "fake:const:\\boxed{1}",
        "--out",
        str(tmp_path / "r"),
        "--quiet",
    )
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["ledger"]["calls"] == 3


def test_kill_9_then_resume_pays_for_no_sample_twice(tmp_path: Path, interrupt_cli: Callable[..., Any]) -> None:
    out = tmp_path / "run"
    ledger = out / "ledger.jsonl"
    args = "run --method majority --bench arith --limit 24 --n 4 --concurrency 2 --quiet".split()
    interrupt_cli(
        *args,
        "--out",
        str(out),
        "--model",
        "fake:echo,latency=0.04",
        when=lambda: lines(ledger) >= 20,
        sig=signal.SIGKILL,
        cwd=SCRATCH,
    )
    before = len(read_entries(ledger))
    assert 0 < before < 96, "the run must be killed mid-way for this test to mean anything"

    result = cli("run", "--resume", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    paid = Counter((e.problem_id, e.sample_index) for e in read_entries(ledger) if not e.cached)
    assert max(paid.values()) == 1  # no sample was paid for twice
    covered = {(e.problem_id, e.sample_index) for e in read_entries(ledger)}
    assert len(covered) == 96
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["problem_id"] for r in records) == sorted({r["problem_id"] for r in records})
    assert len(records) == 24


def test_replay_rescoring_makes_no_model_call(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert (
        cli(
            "run", "--bench", "arith", "--limit", "4", "--n", "2", "--model", "fake:echo", "--out", str(out), "--quiet"
        ).returncode
        == 0
    )
    result = cli("run", "--replay", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    [replay_dir] = [p for p in out.iterdir() if p.name.startswith("replay-")]
    summary = json.loads((replay_dir / "summary.json").read_text())
    original = json.loads((out / "summary.json").read_text())
    assert summary["ledger"]["calls"] == 0 and summary["ledger"]["cache_hits"] == 8
    assert summary["accuracy"] == original["accuracy"] and summary["replay"] is True


def test_grade_json_for_predictions_from_any_system(tmp_path: Path, shared_data: Path) -> None:
    predictions = write_jsonl(
        tmp_path / "p.jsonl",
        [
            {"id": "aime24-I-1", "prediction": "The walk takes \\boxed{204} minutes."},
            {"id": "aime24-I-2", "prediction": "024"},
            {"id": "aime24-I-3", "prediction": "no box, maybe 55"},
        ],
    )
    result = cli(
        "grade", "--bench", "aime24", "--predictions", str(predictions), "--data-dir", str(shared_data), "--json"
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["n"] == 3 and len(report["missing"]) == 27
    assert [p["correct"] for p in report["per_problem"]] == [True, False, False]
    assert report["accuracy"] == pytest.approx(1 / 3)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"id": "arith-d2-0", "answer": "12"}, 'no "prediction" field (it has answer, id)'),  # another system's shape
        ({"id": "arith-d2-0", "prediction": {"value": 12}}, "the prediction must be text or a number, not a JSON dict"),
    ],
)
def test_grade_refuses_a_file_it_cannot_read_rather_than_scoring_it_zero(
    tmp_path: Path, row: dict[str, Any], message: str
) -> None:
    predictions = write_jsonl(tmp_path / "p.jsonl", [row])
    result = cli("grade", "--bench", "arith", "--predictions", str(predictions))
    assert result.returncode == 2 and message in result.stderr and "0.000" not in result.stdout
    assert f"{predictions}:1" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--model", "nope:x"], "unknown model provider 'nope'"),
        (["run", "--bench", "aime99"], "unknown benchmark 'aime99'; registered: aime24"),
        (["run", "--method", "magic"], "unknown method 'magic'"),
        (["run", "--bench", "aime24", "--data-dir", "/does/not/exist"], "not a readable folder"),
        (["run", "--bench-opt", "digits"], "--bench-opt expects KEY=VALUE"),
        (["run", "--bench-opt", "colour=red"], "does not take option 'colour'"),
        (["run", "--n", "0"], "--n: Input should be greater than or equal to 1"),
        (["run", "--resume", "/does/not/exist"], "not a run directory"),
        (["grade", "--bench", "arith", "--predictions", "/does/not/exist.jsonl"], "cannot read"),
        (["run", "--method", "trt", "-T", "digits=3"], "give 'digits=3' as --bench-opt digits=3"),  # inspect's -T
    ],
)
def test_bad_input_is_one_clear_line_and_a_nonzero_exit(args: list[str], message: str) -> None:
    result = cli(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert not (SCRATCH / "runs").exists(), "bad input must not leave a run directory behind"
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_malformed_config_on_resume_is_a_clear_error(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"run": {"method": "majority", "bench": "arith", "n": "many"}}))
    result = cli("run", "--resume", str(run))
    assert result.returncode == 2 and "malformed config" in result.stderr and "Traceback" not in result.stderr


def test_help_and_import_do_not_load_heavy_libraries() -> None:
    code = (
        "import sys, testtime.cli, testtime.models, testtime.run.execute; "
        "heavy = [m for m in ('torch', 'transformers', 'litellm', 'vllm') if m in sys.modules]; print(heavy)"
    )
    probe = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip() == "[]", probe.stderr
    assert "Usage" in cli("--help").stdout


def test_list_names_every_registered_thing() -> None:
    result = cli("list")
    assert result.returncode == 0
    for name in ("majority", "single", "aime24", "math500", "arith", "litellm", "vllm", "hf:smollm2-135m"):
        assert name in result.stdout


def test_grade_code_predictions_in_the_sandbox(tmp_path: Path, shared_data: Path, open_sandbox_or_skip: object) -> None:
    predictions = write_jsonl(
        tmp_path / "p.jsonl",
        [
            {"id": "abc387_a", "prediction": "```python\na, b = map(int, input().split())\nprint((a + b) ** 2)\n```"},
            {"id": "abc387_b", "prediction": "print(0)"},
            {"id": "3731", "prediction": "I could not solve it."},
        ],
    )
    result = cli(
        "grade", "--bench", "lcb-v6", "--predictions", str(predictions), "--data-dir", str(shared_data), "--json"
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert [p["status"] for p in report["per_problem"]] == ["correct", "wrong_answer", "compile_error"]
    assert report["summary"]["graded_on_public_tests_only"] == 3


def test_ctrl_c_stops_cleanly_and_says_how_to_resume(tmp_path: Path, interrupt_cli: Callable[..., Any]) -> None:
    out = tmp_path / "run"
    args = "run --method majority --bench arith --limit 20 --n 4 --concurrency 2 --quiet".split()
    process = interrupt_cli(
        *args,
        "--out",
        str(out),
        "--model",
        # Slow enough that sampling outlasts a slow first grade, so results cannot arrive in one late burst.
        "fake:echo,latency=0.5",
        when=lambda: lines(out / "results.jsonl") >= 1,
        sig=signal.SIGINT,
        cwd=SCRATCH,
    )
    stderr = process.stderr
    assert process.returncode == 130
    assert f"--resume {out}" in stderr and "Traceback" not in stderr
    finished = len((out / "results.jsonl").read_text().splitlines())
    assert 0 < finished < 20
    assert cli("run", "--resume", str(out), "--quiet", "--concurrency", "64").returncode == 0  # the rest at once
    assert len((out / "results.jsonl").read_text().splitlines()) == 20


def test_progress_counts_calls_and_rounds_against_what_is_planned() -> None:
    from testtime.cli.display import RunProgress
    from testtime.core.ledger import LedgerEntry, LedgerTotals
    from testtime.run.observer import ProgressPlan

    totals = LedgerTotals()
    bar = RunProgress(enabled=False)
    bar.start(ProgressPlan(problems=2, done=0, totals=totals, planned_calls=26, rounds=4))
    for _ in range(7):
        totals.add(LedgerEntry(attempts=1))
    bar.tick(rounds_done=1)
    bar.stop()
    calls, rounds = bar.progress.tasks[1], bar.progress.tasks[2]
    assert (calls.completed, calls.total, rounds.completed, rounds.total) == (7, 26, 1, 4)


def test_a_training_runs_progress_lines_count_its_optimiser_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """TTRL trains before it answers: off a terminal its lines once said `0/16 problems` for 12.5 of 15 minutes;
    each line now says how many optimiser steps have trained."""
    from testtime.cli import display
    from testtime.core.ledger import LedgerEntry, LedgerTotals
    from testtime.run.observer import ProgressPlan

    totals = LedgerTotals()
    lines = display.RunProgress(enabled=True)
    assert lines.lines, "the suite's stderr is no terminal: the plain-line path"
    lines.start(ProgressPlan(problems=16, done=0, totals=totals))
    for _ in range(3):
        totals.add(LedgerEntry(kind="train_step", seconds=1.0))
    monkeypatch.setattr(display, "PROGRESS_LINE_S", 0.0)
    with display.console.capture() as captured:
        lines.tick(rounds_done=0)
    lines.stop()
    assert "progress: 0/16 problems" in captured.get() and "trained steps 3" in captured.get()


def test_a_local_model_says_it_is_loading_before_the_first_answer(tmp_path: Path) -> None:
    """The embedded model takes seconds (its first conversion ~30 s) before any call lands: the terminal
    says so on a line of its own, rather than sitting at 0/N."""
    pytest.importorskip("torch")
    from testtime.cli.display import console, show_model_notices
    from testtime.core.errors import UserError
    from testtime.models.hf import HFModel

    show_model_notices()
    with console.capture() as captured, pytest.raises(UserError, match="cannot load hf model"):
        HFModel(str(tmp_path / "no-such-model"), name="hf:mine").load()
    assert f"loading model hf:mine from {tmp_path / 'no-such-model'}" in captured.get()


def test_a_run_whose_stderr_is_no_terminal_prints_progress_lines(tmp_path: Path) -> None:
    """A log file, CI or nohup gets no bars: a plain line at each tenth of the problems (and every 10 s),
    each with the calls, tokens and cost so far; --quiet prints none."""
    run = ("run", "--bench", "arith", "--limit", "20", "--model", "fake:echo", "--n", "2")
    result = cli(*run, "--out", str(tmp_path / "a"))
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("progress: ")]
    assert len(lines) == 10 and lines[-1].startswith("progress: 20/20 problems · calls 40 ")
    assert "━" not in result.stderr  # no bar drawn into the log
    quiet = cli(*run, "--out", str(tmp_path / "b"), "--quiet")
    assert quiet.returncode == 0 and "progress: " not in quiet.stderr
