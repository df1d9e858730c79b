"""Ctrl-C, SIGTERM and SIGHUP stop a run the same way: no new call, the calls in flight land in the ledger
(nothing the server answered is paid again), a summary is written, the resume command printed, and the
exit status is 128 + the signal."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testtime.core.ledger import read_entries
from testtime.models.mock_server import MockChatServer


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_keeps_the_calls_in_flight_and_says_how_to_resume(
    sig: int, tmp_path: Path, interrupt_cli: Callable[..., Any], testtime_cli: Callable[..., Any]
) -> None:
    out = tmp_path / "run"
    with MockChatServer(latency_s=0.4) as server:
        args = ["run", "--bench", "arith", "--limit", "12", "--n", "4", "--concurrency", "3", "--quiet"]
        process = interrupt_cli(
            *args, "--model", "openai:mock", "--api-base", server.url, "--out", str(out),
            when=lambda: _lines(out / "results.jsonl") >= 1, sig=sig, cwd=tmp_path,
        )  # fmt: skip
        assert process.returncode == 128 + sig, process.stderr
        assert f"interrupted by {signal.Signals(sig).name}" in process.stderr
        assert f"testtime run --resume {out}" in process.stderr and "Traceback" not in process.stderr
        answered = server.completed
        paid = [e for e in read_entries(out / "ledger.jsonl") if not e.cached]
        assert len(paid) == answered  # every answer the server gave is in the ledger: none lost to the stop
        summary = json.loads((out / "summary.json").read_text())
        assert summary["stopped"].startswith("interrupted") and not summary["complete"]

        resumed = testtime_cli("run", "--resume", str(out), "--quiet")
        assert resumed.returncode == 0, resumed.stderr
        assert server.completed == 12 * 4  # across the stop, every sample paid exactly once
