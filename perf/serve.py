"""`testtime serve --method single` against its upstream directly: what the endpoint adds per request.

One upstream (the scripted OpenAI-compatible server, in a process of its own, with injected latency) and one
client (bare aiohttp at a fixed concurrency) send the same requests two ways, side by side in one run: straight
to the upstream, and through `testtime serve` (also a process of its own) in front of it. A third row is
testtime's rollout engine alone (the `openai:` provider with the run's ledger, cache and trace, no HTTP server
in front) on the same upstream: the CPU the serve process spends per request beyond it is the endpoint's own.
Goals (issue 26): ≤ 1.05× the direct latency and ≤ 1 ms CPU per request of overhead at concurrency 32.

    .venv/bin/python perf/serve.py [--requests 1000] [--concurrency 32] [--latency 0.1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from testtime.core.cache import CompletionCache
from testtime.core.ledger import Ledger
from testtime.core.records import Message, SamplingParams
from testtime.core.rollout import RolloutEngine
from testtime.core.trace import Trace
from testtime.models import resolve_model

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """A process's user + system CPU time so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def latencies(url: str, model: str, requests: int, concurrency: int, offset: int) -> tuple[list[float], float]:
    """Each request's latency and the wall time of all of them, `concurrency` at a time."""

    async def send_all() -> list[float]:
        slots = asyncio.Semaphore(concurrency)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

            async def one(i: int) -> float:
                body = {"model": model, "messages": [{"role": "user", "content": f"What is {offset + i} + 1?"}]}
                async with slots:
                    started = time.perf_counter()
                    async with session.post(f"{url}/chat/completions", json=body) as response:
                        await response.read()
                        assert response.status == 200, await response.text()
                    return time.perf_counter() - started

            return await asyncio.gather(*(one(i) for i in range(requests)))

    wall = time.perf_counter()
    found = asyncio.run(send_all())
    return found, time.perf_counter() - wall


def engine_cpu(url: str, requests: int, concurrency: int, folder: Path) -> tuple[list[float], float, float]:
    """testtime's engine alone on the same upstream: latencies, wall time, and its CPU per call."""
    model = resolve_model("openai:mock", api_base=[url])
    engine = RolloutEngine(
        model,
        model_name="openai:mock",
        cache=CompletionCache(folder / "cache.sqlite"),
        ledger=Ledger(folder / "ledger.jsonl"),
        concurrency=concurrency,
        trace=Trace(folder),
    )

    async def main() -> list[float]:
        slots = asyncio.Semaphore(concurrency)  # as many in flight as the client keeps: latency without queueing

        async def one(i: int) -> float:
            async with slots:
                started = time.perf_counter()
                messages = [Message(role="user", content=f"What is {i} + 2?")]
                await engine.sample(messages, 1, SamplingParams(seed=i), problem_id=str(i))
                return time.perf_counter() - started

        found = await asyncio.gather(*(one(i) for i in range(requests)))
        await model.aclose()
        return found

    wall, cpu = time.perf_counter(), time.process_time()
    found = asyncio.run(main())
    return found, time.perf_counter() - wall, (time.process_time() - cpu) / requests


def start(args: list[str]) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    return process, process.stdout.readline().strip().rstrip("/")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--smoke", action="store_true", help="a tiny size, to prove the script still runs (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.requests, args.concurrency, args.latency = 64, 8, 0.01
    upstream, upstream_url = start(
        [sys.executable, "-m", "testtime.models.mock_server", "--latency", str(args.latency)]
    )
    with tempfile.TemporaryDirectory() as tmp:
        serve, serve_url = start(
            [sys.executable, "-m", "testtime.cli", "serve", "--model", "openai:mock", "--api-base", upstream_url,
             "--method", "single", "--port", "0", "--out", f"{tmp}/served", "--concurrency", str(4 * args.concurrency)]
        )  # fmt: skip
        try:
            for url, model in ((upstream_url, "mock"), (serve_url, "single/openai:mock")):  # warm both paths
                latencies(url, model, args.concurrency, args.concurrency, offset=10**6)
            direct, direct_wall = latencies(upstream_url, "mock", args.requests, args.concurrency, offset=0)
            before = cpu_seconds(serve.pid)
            served, served_wall = latencies(serve_url, "single/openai:mock", args.requests, args.concurrency, 0)
            serve_cpu = (cpu_seconds(serve.pid) - before) / args.requests
            Path(tmp, "engine").mkdir()
            alone, alone_wall, alone_cpu = engine_cpu(
                upstream_url, args.requests, args.concurrency, Path(tmp, "engine")
            )
        finally:
            serve.terminate()
            serve.wait(60)
            upstream.kill()
    rows = [
        ("client → upstream (direct)", direct, direct_wall, None),
        ("testtime engine alone → upstream", alone, alone_wall, alone_cpu),
        ("client → testtime serve single → upstream", served, served_wall, serve_cpu),
    ]
    base = statistics.mean(direct)
    print(f"{args.requests} requests, concurrency {args.concurrency}, upstream latency {args.latency * 1000:.0f} ms")
    print(f"{'path':44} {'mean ms':>8} {'p95 ms':>8} {'× direct':>9} {'wall s':>7} {'CPU ms/req':>11}")
    for name, found, wall, cpu in rows:
        p95 = statistics.quantiles(found, n=20)[-1]
        shown = "-" if cpu is None else f"{cpu * 1000:.2f}"
        mean = statistics.mean(found)
        print(f"{name:44} {mean * 1000:8.1f} {p95 * 1000:8.1f} {mean / base:9.3f} {wall:7.2f} {shown:>11}")
    print(
        f"endpoint overhead: {(statistics.mean(served) / base - 1) * 100:+.1f}% latency, "
        f"{(serve_cpu - alone_cpu) * 1000:.2f} ms CPU per request beyond the engine's own "
        "(the serve process's CPU per request, minus the engine's CPU per call in the row above)"
    )


if __name__ == "__main__":
    main()
