"""One lifecycle for every run: new, resume with changed settings (recorded), replay, older directories
upgraded through the one migration, and one writer per directory."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testtime.core.errors import UserError
from testtime.models.mock_server import MockChatServer
from testtime.run import lifecycle
from testtime.run.directory import RunDir
from testtime.run.execute import execute
from testtime.run.settings import ResumeChanges, RunSettings

Cli = Callable[..., Any]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
SETTINGS = RunSettings(method="majority", bench="arith", model="fake:", limit=3, n=2)


def test_a_resume_may_move_to_another_server_and_says_so(testtime_cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "run"
    with MockChatServer(fault=503) as dead:  # the first server fails every call
        first = testtime_cli(
            "run", "--bench", "arith", "--limit", "2", "--n", "2", "--model", "openai:mock", "--api-base", dead.url,
            "--out", str(out), "--quiet", "--request-timeout", "2",
        )  # fmt: skip
    assert first.returncode == 3  # nothing measured
    with MockChatServer() as replacement:
        again = testtime_cli(
            "run", "--resume", str(out), "--api-base", replacement.url, "--concurrency", "3",
            "--request-timeout", "30", "--quiet",
        )  # fmt: skip
        assert again.returncode == 0, again.stderr
        assert replacement.requests == 4  # every failed sample asked again, on the new server
    manifest = RunDir(out).read_manifest()
    assert manifest.run.api_base == [replacement.url] and manifest.run.concurrency == 3
    [change] = manifest.resumed
    assert change.changed == {"api_base": [replacement.url], "request_timeout": 30.0, "concurrency": 3}
    summary = RunDir(out).read_summary()
    assert summary is not None and summary.accuracy is not None and summary.error_rate == 0.0


def test_a_resume_that_changes_nothing_records_nothing(tmp_path: Path) -> None:
    execute(lifecycle.create(SETTINGS, tmp_path / "run"))
    execute(lifecycle.resume(tmp_path / "run", ResumeChanges(concurrency=SETTINGS.concurrency)))
    assert RunDir(tmp_path / "run").read_manifest().resumed == []


def _slow_writer(out: Path, *extra: str, **pipes: Any) -> subprocess.Popen[str]:
    """A run that takes minutes (half a second a call), started as a user would start it."""
    args = ["run", "--model", "fake:echo,latency=0.5", "--limit", "40", "--out", str(out), "--quiet", *extra]
    return subprocess.Popen([sys.executable, "-m", "testtime.cli", *args], text=True, **pipes)


def test_a_second_writer_is_refused_with_the_holders_pid(tmp_path: Path) -> None:
    out = tmp_path / "slow"
    writer = _slow_writer(out, "--n", "2", "--concurrency", "2", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not (out / "ledger.jsonl").exists():
            time.sleep(0.05)
        with pytest.raises(UserError, match=f"being written by process {writer.pid}"):
            lifecycle.resume(out)
        with pytest.raises(UserError, match="already holds a run"):
            lifecycle.create(SETTINGS, out)
    finally:
        writer.send_signal(signal.SIGINT)
        writer.communicate(timeout=60)
    lifecycle.resume(out).release()  # the writer is gone: its lock went with it


def test_a_killed_writer_leaves_no_lock_behind(tmp_path: Path) -> None:
    out = tmp_path / "killed"
    writer = _slow_writer(out)
    deadline = time.time() + 60
    while time.time() < deadline and not (out / "ledger.jsonl").exists():
        time.sleep(0.05)
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait(timeout=30)
    opened = lifecycle.resume(out)  # kill -9 released the lock
    opened.release()


@pytest.mark.parametrize(
    ("prepare", "message"),
    [
        (lambda p: p.write_text("not a folder"), "is a file, not a folder"),
        (lambda p: (p.mkdir(), (p / "notes.txt").write_text("mine")), "is a folder with other files in it, not a run"),
    ],
)
def test_out_must_be_new_or_empty(testtime_cli: Cli, tmp_path: Path, prepare: Any, message: str) -> None:
    out = tmp_path / "out"
    prepare(out)
    done = testtime_cli("run", "--model", "fake:", "--limit", "1", "--out", str(out))
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_a_creation_killed_before_its_manifest_is_created_again(tmp_path: Path) -> None:
    """A Ray worker whose node died between taking the lock and writing config.json left a lone `.lock`: the
    retried task creates the run there; a creation still holding that lock is refused, saying whose it is."""
    out = tmp_path / "shard"
    out.mkdir()
    (out / ".lock").write_text("")
    lifecycle.create(SETTINGS, out).release()
    assert (out / "config.json").is_file()
    live = tmp_path / "live"
    live.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(live / ".lock")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(UserError, match=f"being written by process {holder.pid}"):
            lifecycle.create(SETTINGS, live)
    finally:
        holder.kill()
        holder.wait()


LOCK_HOLDER = """
import fcntl, os, sys, time
handle = open(sys.argv[1], "a+")
fcntl.flock(handle, fcntl.LOCK_EX)
handle.seek(0); handle.truncate(); handle.write(str(os.getpid())); handle.flush()
print("locked", flush=True)
time.sleep(60)
"""


def _schema1(tmp_path: Path, name: str = "majority-arith-v0") -> Path:
    run = tmp_path / name
    shutil.copytree(FIXTURES / name, run)
    config = json.loads((run / "config.json").read_text())
    config["run"]["model"] = "fake:"  # the scripted file it was made with is gone
    (run / "config.json").write_text(json.dumps(config))
    return run


def test_reading_an_older_run_changes_nothing_in_it(tmp_path: Path, testtime_cli: Cli) -> None:
    run = _schema1(tmp_path)
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    view = testtime_cli("view", str(run), "--html", str(tmp_path / "page.html"))
    assert view.returncode == 0, view.stderr
    manifest = RunDir(run).read_manifest()
    assert manifest.schema_version == 2 and manifest.effective is None  # not recorded then: null, not a guess
    assert manifest.run.api_base == [] and manifest.method["name"] == "majority"
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before


def test_resuming_an_older_run_upgrades_it_and_keeps_the_original(tmp_path: Path, testtime_cli: Cli) -> None:
    run = _schema1(tmp_path)
    original = (run / "results.jsonl").read_text()
    done = testtime_cli("run", "--resume", str(run), "--quiet")
    assert done.returncode == 0, done.stderr
    assert "upgraded" in done.stderr and "schema1" in done.stderr
    assert (run / "schema1" / "results.jsonl").read_text() == original
    config = json.loads((run / "config.json").read_text())
    assert config["schema_version"] == 2 and config["effective"]["sampling"]["solve"]["temperature"] == 0.7
    assert "details" not in (run / "results.jsonl").read_text()  # rewritten in the current shape
    summary = json.loads((run / "summary.json").read_text())
    assert summary["schema_version"] == 2 and summary["problems"] == 4 and summary["complete"]


def test_an_older_summary_reads_with_the_new_names(tmp_path: Path) -> None:
    run = tmp_path / "old"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"run": {"method": "majority", "bench": "arith", "model": "x:"}}))
    old = {
        "problems": 2,
        "accuracy": {"mean": 0.0, "ci_low": 0.0, "ci_high": 0.6},
        "pass@1_avg": {"mean": 0.0, "ci_low": 0.0, "ci_high": 0.6},
        "samples": 4,
        "error_rate": 1.0,
        "first_error": "401 Unauthorized",
        "rounds": {"accuracy": [0.5], "coverage": [0.5], "rollout_mean": [0.25]},
        "ledger": {"calls": 4, "errors": 4, "cost_usd": 0.0, "cost_known": False, "train_steps": 0, "train_flops": 0},
    }
    (run / "summary.json").write_text(json.dumps(old))
    summary = RunDir(run).read_summary()
    assert summary is not None
    assert summary.accuracy is None and summary.pass_at_1 is None  # schema 1 wrote 0.0 for nothing measured
    assert summary.ledger.cost_usd is None and summary.ledger.train_flops is None
    assert summary.rounds is not None and summary.rounds.pass_at_1 == [0.25]


def test_version_and_the_default_selector_of_each_method(testtime_cli: Cli) -> None:
    from importlib.metadata import version

    shown = testtime_cli("--version")
    assert shown.returncode == 0 and shown.stdout.strip() == f"testtime {version('testtime')}"
    listing = testtime_cli("list", env={"COLUMNS": "200"}).stdout
    lines = listing.splitlines()
    trt = next(i for i, line in enumerate(lines) if line.startswith("│ method") and "│ trt " in line)
    assert "math: exclusivity" in lines[trt] and "code: execution" in lines[trt + 1]  # not majority, as once said
    assert any(line.startswith("│ method") and "│ majority " in line and "math: majority" in line for line in lines)
