"""Rollout-engine overhead: 1,000 calls at concurrency 64 against 200 ms of injected latency.

Six rows, run side by side: the engine with the fake backend (pure engine cost: cache, ledger, retries,
semaphore), the engine through litellm and through the direct `openai:` provider against one real local
HTTP server (each adds its client stack), bare aiohttp POSTs to that server with no engine (the floor that
server and this box allow), and litellm and `openai:` against a server with a listen backlog of 5 (Python's
`http.server` and cpp-httplib's default: a burst of connects beyond it meets SYN drops and 1 s
retransmits). The server runs in its own process, so its threads neither share this
process's GIL nor count in its CPU time (they do share the box's cores).
Ideal wall time = calls × latency / concurrency. Goals: ≤ 1.3× ideal, < 1 ms engine overhead per call;
`openai:` ≤ 1.3× ideal and ≤ 1.5 ms CPU per call.

    .venv/bin/python perf/orchestration.py [--calls 1000] [--concurrency 64] [--latency 0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testtime.core.cache import CompletionCache
from testtime.core.ledger import Ledger
from testtime.core.model import LanguageModel
from testtime.core.records import Message, SamplingParams
from testtime.core.rollout import RolloutEngine
from testtime.models import resolve_model
from testtime.models.fake import FakeModel


def run_engine(model: LanguageModel, calls: int, concurrency: int, folder: Path) -> tuple[float, float]:
    """Wall time of `calls` samples (spread over prompts of 8 samples), and the engine's own CPU per call."""
    engine = RolloutEngine(
        model,
        model_name=getattr(model, "name", "m"),
        cache=CompletionCache(folder / "c.sqlite"),
        ledger=Ledger(folder / "ledger.jsonl"),
        concurrency=concurrency,
    )  # type: ignore[arg-type]
    prompts = [[Message(role="user", content=f"What is {i} + {i}?")] for i in range(calls // 8)]

    async def main() -> None:
        await asyncio.gather(*(engine.sample(p, 8, SamplingParams(seed=1)) for p in prompts))
        await model.aclose()

    wall, cpu = time.perf_counter(), time.process_time()
    asyncio.run(main())
    return time.perf_counter() - wall, time.process_time() - cpu


def run_bare(url: str, calls: int, concurrency: int) -> tuple[float, float]:
    """The same POSTs from bare aiohttp, no engine: what the local server and this box allow at best."""
    import aiohttp

    body = {"model": "mock", "messages": [{"role": "user", "content": "What is 1 + 1?"}], "seed": 1}

    async def send_all() -> None:
        slots = asyncio.Semaphore(concurrency)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

            async def one() -> None:
                async with slots, session.post(f"{url.rstrip('/')}/chat/completions", json=body) as response:
                    await response.read()

            await asyncio.gather(*(one() for _ in range(calls)))

    wall, cpu = time.perf_counter(), time.process_time()
    asyncio.run(send_all())
    return time.perf_counter() - wall, time.process_time() - cpu


def _serve(latency: float, backlog: int) -> tuple[subprocess.Popen[str], str]:
    """The mock server in a process of its own; its URL."""
    server = subprocess.Popen(
        [sys.executable, "-m", "testtime.models.mock_server", "--latency", str(latency), "--backlog", str(backlog)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None
    return server, server.stdout.readline().strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--smoke", action="store_true", help="a tiny size, to prove the script still runs (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.calls, args.concurrency, args.latency = 40, 8, 0.01
    ideal = args.calls * args.latency / args.concurrency
    rows = []
    server, url = _serve(args.latency, 256)
    small, small_url = _serve(args.latency, 5)
    with tempfile.TemporaryDirectory() as tmp:
        fake = FakeModel(latency_s=args.latency)
        (Path(tmp) / "fake").mkdir()
        wall, cpu = run_engine(fake, args.calls, args.concurrency, Path(tmp) / "fake")
        rows.append(("engine + fake backend", wall, cpu))
        api = resolve_model("litellm:openai/mock", api_base=url)
        (Path(tmp) / "api").mkdir()
        wall, cpu = run_engine(api, args.calls, args.concurrency, Path(tmp) / "api")
        rows.append(("engine + litellm + local HTTP server", wall, cpu))
        direct = resolve_model("openai:mock", api_base=url)
        (Path(tmp) / "openai").mkdir()
        wall, cpu = run_engine(direct, args.calls, args.concurrency, Path(tmp) / "openai")
        rows.append(("engine + openai + local HTTP server", wall, cpu))
        rows.append(("bare aiohttp POSTs, no engine (floor)", *run_bare(url, args.calls, args.concurrency)))
        for name, spec in (("litellm", "litellm:openai/mock"), ("openai", "openai:mock")):
            (Path(tmp) / f"small-{name}").mkdir()
            model = resolve_model(spec, api_base=small_url)
            wall, cpu = run_engine(model, args.calls, args.concurrency, Path(tmp) / f"small-{name}")
            rows.append((f"engine + {name} + backlog-5 server", wall, cpu))
    server.kill()
    small.kill()
    print(
        f"{args.calls} calls, concurrency {args.concurrency}, latency {args.latency * 1000:.0f} ms; "
        f"ideal wall {ideal:.2f} s"
    )
    print(f"{'path':40} {'wall s':>8} {'× ideal':>8} {'CPU ms/call':>12}")
    for name, wall, cpu in rows:
        print(f"{name:40} {wall:8.2f} {wall / ideal:8.2f} {cpu / args.calls * 1000:12.2f}")
    print(
        "CPU ms/call is this process's CPU time per call: for the fake row that is the engine's own overhead "
        "(cache, ledger, retries, scheduling); the API rows add their HTTP client stacks."
    )


if __name__ == "__main__":
    main()
