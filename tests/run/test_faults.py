"""Runs against a hostile or broken server (a real HTTP server on 127.0.0.1): it echoes the key in a 401, it
hangs, it fails some calls. The run says what happened in its exit status, never leaks the key, keeps its
status labels in line with its rates, and a resume asks again for exactly the samples that failed."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from testtime.core.ledger import read_entries
from testtime.models.mock_server import MockChatServer

Cli = Callable[..., CompletedProcess[str]]
SECRET = "sk-proj-" + "Q7" * 20
RUN = "run --method majority --bench arith --quiet --model litellm:openai/mock".split()

pytestmark = pytest.mark.usefixtures("fast_retries")  # the failures are the point, not the waits


def run(cli: Cli, server: MockChatServer, out: Path, *args: str) -> CompletedProcess[str]:
    return cli(
        *RUN, "--api-base", server.url, "--api-key-env", "MY_KEY", "--out", str(out), *args, env={"MY_KEY": SECRET}
    )


def test_a_key_echoed_in_a_401_is_never_written_or_shown(testtime_cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "run"
    with MockChatServer(fault="echo401") as server:
        done = run(testtime_cli, server, out, "--limit", "2", "--n", "2")
    assert done.returncode == 3  # every call failed: nothing was measured, and the exit status says so
    assert "every model call failed (4 calls)" in done.stderr and "Incorrect API key provided" in done.stderr
    for shown in (done.stdout, done.stderr):
        assert SECRET not in shown and SECRET[:12] not in shown
    for path in out.iterdir():
        data = path.read_bytes()
        assert SECRET.encode() not in data and SECRET[-12:].encode() not in data, path
    assert "[redacted]" in (out / "ledger.jsonl").read_text()


def test_when_every_call_fails_the_labels_agree_with_the_rates(testtime_cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "run"
    with MockChatServer(fault=401) as server:
        done = run(testtime_cli, server, out, "--limit", "3", "--n", "2")
    assert done.returncode == 3
    summary = json.loads((out / "summary.json").read_text())
    assert summary["prediction_status"] == {"error": 3} and summary["sample_status"] == {"error": 6}
    assert summary["error_rate"] == 1.0 and summary["no_answer_rate"] == 0.0
    # Nothing was measured: no accuracy a reader could mistake for a real 0 (pandas would average it in)
    assert summary["accuracy"] is None and summary["pass@1"] is None and summary["maj@k"] is None


def test_a_hanging_server_is_cut_off_by_the_request_timeout(testtime_cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "run"
    started = time.monotonic()
    with MockChatServer(fault="hang") as server:
        done = run(testtime_cli, server, out, "--limit", "1", "--n", "1", "--request-timeout", "0.5")
    assert done.returncode == 3 and time.monotonic() - started < 60
    [entry] = [e for e in read_entries(out / "ledger.jsonl") if not e.cached]
    assert entry.attempts == 6 and "request timeout of 0.5 s" in (entry.error or "")
    assert json.loads((out / "config.json").read_text())["run"]["request_timeout"] == 0.5


def test_resume_asks_again_for_failed_samples_and_only_those(testtime_cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "run"
    with MockChatServer(faults={1: 400, 2: 400}) as server:  # a 400 is not retried: two samples end as errors
        first = run(testtime_cli, server, out, "--limit", "2", "--n", "2", "--concurrency", "1")
        assert first.returncode == 0 and "50% of samples are errors" in first.stderr
        kept = testtime_cli("run", "--resume", str(out), "--no-retry-errors", "--quiet", env={"MY_KEY": SECRET})
        assert kept.returncode == 0 and server.requests == 4  # asked for nothing
        again = testtime_cli("run", "--resume", str(out), "--quiet", env={"MY_KEY": SECRET})
        assert again.returncode == 0, again.stderr
        assert server.requests == 6  # the two failed samples, and nothing that had succeeded
    summary = json.loads((out / "summary.json").read_text())
    assert summary["error_rate"] == 0.0 and summary["retried_problems"] >= 1 and summary["problems"] == 2
    entries = read_entries(out / "ledger.jsonl")
    assert sum(e.error is not None for e in entries) == 2  # the failed attempts stay in the ledger
    assert sum(not e.cached and e.error is None for e in entries) == 4  # each sample paid for once


def _nowhere_in(out: Path, *shown: str) -> None:
    for text in shown:
        assert SECRET not in text and SECRET[:12] not in text
    for path in out.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert SECRET.encode() not in data and SECRET[-12:].encode() not in data, path


def test_a_key_echoed_inside_a_successful_answer_is_scrubbed(testtime_cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "run"
    with MockChatServer(reply=lambda messages: f"Your key is {SECRET}. \\boxed{{3}}") as server:
        done = run(testtime_cli, server, out, "--limit", "2", "--n", "2")
    assert done.returncode == 0, done.stderr
    _nowhere_in(out, done.stdout, done.stderr)
    assert "[redacted]" in (out / "blobs.jsonl").read_text()  # the answer kept, the key gone


def test_a_key_written_into_the_server_url_is_never_recorded(testtime_cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "run"
    with MockChatServer() as server:
        keyed = server.url.replace("http://", f"http://me:{SECRET}@") + f"?api_key={SECRET}"
        args = ("--model", "openai:mock", "--api-base", keyed, "--limit", "2", "--n", "2", "--quiet")
        done = testtime_cli("run", "--bench", "arith", *args, "--out", str(out))
        assert done.returncode == 0, done.stderr
        _nowhere_in(out, done.stdout, done.stderr)
        config = json.loads((out / "config.json").read_text())
        assert config["run"]["api_base"] == [
            f"{server.url.replace('http://', 'http://me:[redacted]@')}?api_key=[redacted]"
        ]
        refused = testtime_cli("run", "--resume", str(out), "--quiet")
        assert refused.returncode == 2 and "carried a credential" in refused.stderr
        again = testtime_cli("run", "--resume", str(out), "--api-base", keyed, "--quiet")
        assert again.returncode == 0, again.stderr
        _nowhere_in(out, again.stdout, again.stderr)


def test_a_full_disk_is_one_line_and_a_resume_recovers(testtime_cli: Cli, tmp_path: Path) -> None:
    """A run directory on a 160 KiB filesystem fills up mid-run: one line, no traceback; once there is room
    again, `--resume` finishes the run."""
    import subprocess

    import pytest

    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("needs root to mount a small tmpfs")
    try:
        out = disk / "run"
        done = testtime_cli("run", "--model", "fake:", "--limit", "32", "--quiet", "--out", str(out))
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert f"cannot write to {out}" in done.stderr and f"--resume {out}" in done.stderr
        subprocess.run(["mount", "-o", "remount,size=20m", str(disk)], check=True)
        again = testtime_cli("run", "--resume", str(out), "--quiet")
        assert again.returncode == 0, again.stderr
        assert json.loads((out / "summary.json").read_text())["problems"] == 32
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_a_stream_past_a_file_size_limit_is_one_line_and_a_resume_finishes(tmp_path: Path) -> None:
    """RLIMIT_FSIZE (a quota, a file-size limit) under a stream, as users run it (stderr to a file): one line that
    says how to continue, every arrival recorded before kept whole, and the resume answers the rest."""
    import resource
    import subprocess
    import sys

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (60 << 10, 60 << 10))

    testtime = str(Path(sys.executable).with_name("testtime"))
    out, log = tmp_path / "stream", tmp_path / "stderr.log"
    with log.open("w") as stderr:
        done = subprocess.run(
            [testtime, "run", "--bench", "arith", "--stream", "--n", "4", "--model", "fake:echo", "--out", str(out)],
            stdout=subprocess.PIPE, stderr=stderr, preexec_fn=limited, timeout=120,
        )  # fmt: skip
    said = log.read_text()
    assert done.returncode == 2 and "Traceback" not in said, said
    errors = [line for line in said.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and f"cannot write to {out}" in errors[0] and f"--resume {out}" in errors[0], said
    kept = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    again = subprocess.run([testtime, "run", "--resume", str(out), "--quiet"], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    finished = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert finished[: len(kept)] == kept and len(finished) == 32
