"""Fleets of OpenAI-compatible servers (`--api-base` repeated, or a file of URLs), through both API paths:
calls spread over the servers, a server that fails is taken out and its calls go elsewhere, and a server
killed in the middle of a run costs the run nothing."""

from __future__ import annotations

import asyncio
import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import api_engine
from testtime.core.ledger import read_entries
from testtime.core.records import Message, SamplingParams
from testtime.core.rollout import RolloutEngine
from testtime.models.mock_server import MockChatServer

PROVIDERS = {"litellm": "litellm:openai/mock", "openai": "openai:mock"}


@pytest.fixture(params=sorted(PROVIDERS))
def provider(request: pytest.FixtureRequest) -> str:
    return PROVIDERS[request.param]


def sample_many(provider: str, urls: list[str], prompts: int, n: int) -> RolloutEngine:
    engine = api_engine(provider, urls, concurrency=8, attempts=2)
    model = engine.model

    async def main() -> None:
        try:
            await asyncio.gather(
                *(
                    engine.sample([Message(role="user", content=f"{i} + 1?")], n, SamplingParams(max_tokens=8))
                    for i in range(prompts)
                )
            )
        finally:
            await model.aclose()

    asyncio.run(main())
    return engine


def test_calls_spread_over_every_server(provider: str) -> None:
    with MockChatServer(latency_s=0.02) as a, MockChatServer(latency_s=0.02) as b, MockChatServer(latency_s=0.02) as c:
        engine = sample_many(provider, [a.url, b.url, c.url], 12, 4)
        served = [a.completed, b.completed, c.completed]
    assert sum(served) == 48 and engine.ledger.totals.errors == 0
    assert min(served) >= 6, served  # by load: no server idles while another queues


def test_a_failing_server_is_taken_out_and_its_calls_go_elsewhere(provider: str) -> None:
    with MockChatServer(fault=500) as broken, MockChatServer(latency_s=0.01) as healthy:
        engine = sample_many(provider, [broken.url, healthy.url], 10, 4)
        assert healthy.completed == 40 and broken.completed == 0
        assert broken.requests <= 10, broken.requests  # out after failing, not asked for every call
    totals = engine.ledger.totals
    assert totals.errors == 0 and totals.retries == 0  # failover is routing inside one attempt, not a retry


def _server_process(latency: float) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "testtime.models.mock_server", "--latency", str(latency), "--announce"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def _wait_until_answered(server: subprocess.Popen[str], requests: int, timeout_s: float = 120) -> None:
    """Until the server process (run with --announce) has answered `requests`: which problems a server is
    sent depends on its port's rendezvous hash, so a fixed count of the run's calls proves nothing of it."""
    counts: queue.Queue[int] = queue.Queue()
    threading.Thread(target=lambda: [counts.put(int(line)) for line in server.stdout or ()], daemon=True).start()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if counts.get(timeout=max(0.0, deadline - time.monotonic())) >= requests:
                return
        except queue.Empty:
            break
    raise AssertionError(f"the server did not answer {requests} requests in {timeout_s} s")


def test_a_server_killed_mid_run_costs_the_run_nothing(provider: str, tmp_path: Path) -> None:
    victim, victim_url = _server_process(latency=0.05)
    out = tmp_path / "run"
    try:
        with MockChatServer(latency_s=0.05) as a, MockChatServer(latency_s=0.05) as b:
            args = f"run --method majority --bench arith --limit 24 --n 4 --quiet --model {provider}".split()
            fleet = ["--api-base", a.url, "--api-base", victim_url, "--api-base", b.url]
            run = subprocess.Popen(
                [sys.executable, "-m", "testtime.cli", *args, "--concurrency", "6", "--out", str(out), *fleet],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            _wait_until_answered(victim, 5)
            victim.kill()  # SIGKILL, with calls in flight on its connections
            _, stderr = run.communicate(timeout=300)
            survivors = a.completed + b.completed
    finally:
        victim.kill()
    assert run.returncode == 0, stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["problems"] == 24 and summary["error_rate"] == 0.0
    entries = [e for e in read_entries(out / "ledger.jsonl") if not e.cached]
    assert len(entries) == 96 and all(e.error is None for e in entries)
    victim_answered = 96 - survivors
    assert 3 <= victim_answered <= 40, victim_answered  # a share before it died (about a third of 24), then none


def test_api_base_may_name_a_file_of_urls(tmp_path: Path, testtime_cli: Callable[..., Any]) -> None:
    with MockChatServer() as a, MockChatServer() as b:
        listing = tmp_path / "servers.txt"
        listing.write_text(f"# our two servers\n{a.url}\n\n{b.url}  # the second\n")
        done = testtime_cli(
            *"run --method majority --bench arith --limit 4 --n 4 --quiet --model openai:mock".split(),
            *("--api-base", str(listing), "--out", str(tmp_path / "run")),
        )
        assert done.returncode == 0, done.stderr
        assert a.completed > 0 and b.completed > 0 and a.completed + b.completed == 16
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["run"]["api_base"] == [a.url, b.url]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("localhost:8000/v1", "neither an http(s) URL nor a file of URLs"),
        ("EMPTY_FILE", "the file lists no URL"),
    ],
)
def test_a_bad_api_base_is_one_line_error(
    value: str, message: str, tmp_path: Path, testtime_cli: Callable[..., Any]
) -> None:
    if value == "EMPTY_FILE":
        value = str(tmp_path / "empty.txt")
        Path(value).write_text("# nothing here\n")
    done = testtime_cli(
        *"run --method majority --bench arith --limit 1 --quiet --model openai:mock --api-base".split(), value
    )
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
