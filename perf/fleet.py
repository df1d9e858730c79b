"""Fleet routing on two real vLLM servers (the CPU build, the embedded SmolLM2-135M): the same workload three
ways, side by side in one run.

The workload is a test-time method's shape: P problems, each a long prompt (a few-shot prefix of its own)
sampled n times, then a second round whose prompt extends the first (as TRT's rounds carry the knowledge
list). Rows:
- `least-loaded, 1/request`: each sample its own request, to the server with the fewest in flight (what fleets
  did before): a problem's samples and rounds scatter over both servers;
- `affinity, 1/request`: a problem's calls on one server (rendezvous hashing), each sample its own request;
- `affinity, n/request`: also a problem's n samples in one request (`--n-per-request`: one prefill).
Prefill work is what the servers report (their Prometheus counters): prompt tokens asked for, and of those the
ones their automatic prefix caches answered; computed = asked − cached. Throughput is completion tokens per
second of wall time. Each row starts from empty prefix caches (fresh prompts: a per-row nonce).

    .venv/bin/python perf/fleet.py [--problems 16] [--n 8] [--prefix-words 300] [--max-tokens 32] [--reverse]
    .venv/bin/python perf/fleet.py --smoke     # 4 problems, n=4: that it runs, not the figures
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import time
import urllib.request
from dataclasses import dataclass

from testtime.core.cache import CompletionCache
from testtime.core.ledger import Ledger
from testtime.core.records import Message, SamplingParams
from testtime.core.rollout import RolloutEngine
from testtime.models import resolve_model
from testtime.models.hf import embedded_model_dir
from testtime.models.vllm_server import VLLMServer, vllm_python

ROWS = (("least-loaded", False), ("affinity", False), ("affinity", True))
WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split()


@dataclass
class Row:
    routing: str
    together: bool
    wall_s: float
    completion_tokens: int
    asked: float
    cached: float

    @property
    def computed(self) -> float:
        return self.asked - self.cached


def counters(url: str) -> dict[str, float]:
    """A server's prefix-cache counters (vLLM v1: prefix_cache_queries / prefix_cache_hits, in tokens)."""
    text = urllib.request.urlopen(url.removesuffix("/v1") + "/metrics", timeout=10).read().decode()
    found = {}
    for name in ("prefix_cache_queries", "prefix_cache_hits"):
        values = re.findall(rf"^vllm:{name}_total(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.M)
        found[name] = sum(float(v) for v in values)
    return found


def prompt(problem: int, round_: int, prefix_words: int, nonce: str) -> list[Message]:
    """A problem's own long prefix (its few-shot block), its question, and in round 2 what round 1 learnt."""
    prefix = " ".join(WORDS[(problem * 7 + i * 3) % len(WORDS)] for i in range(prefix_words))
    text = f"[{nonce}] Notes for problem {problem}: {prefix}\nQuestion {problem}: what is {problem} + {problem}?"
    if round_:
        text += "\nWhat earlier attempts found: check the sum twice before answering."
    return [Message(role="user", content=text)]


def run_row(urls: list[str], routing: str, together: bool, args: argparse.Namespace, nonce: str) -> Row:
    model = resolve_model("openai:smollm2", api_base=urls, routing=routing, request_timeout_s=600)
    engine = RolloutEngine(
        model, model_name=model.name, cache=CompletionCache(None), ledger=Ledger(), concurrency=args.concurrency,
        n_per_request=together,
    )  # fmt: skip
    # No seed: vLLM's CPU build (0.32) kills its engine on a seeded request whose prefill is chunked
    # ("CPU Generator does not use offset"), which prompts this long at this concurrency are.
    params = SamplingParams(temperature=0.7, max_tokens=args.max_tokens, seed=None)
    before = [counters(u) for u in urls]

    async def solve(problem: int) -> None:
        for round_ in range(2):
            await engine.sample(
                prompt(problem, round_, args.prefix_words, nonce), args.n, params, problem_id=f"p{problem}"
            )

    async def main() -> float:
        started = time.perf_counter()
        try:
            await asyncio.gather(*(solve(p) for p in range(args.problems)))
        finally:
            await model.aclose()
        return time.perf_counter() - started

    wall = asyncio.run(main())
    after = [counters(u) for u in urls]
    delta = {k: sum(a[k] - b[k] for a, b in zip(after, before, strict=True)) for k in before[0]}
    return Row(
        routing, together, wall, engine.ledger.totals.completion_tokens, delta["prefix_cache_queries"],
        delta["prefix_cache_hits"],
    )  # fmt: skip


def start_servers(count: int) -> list[VLLMServer]:
    """`count` servers, started side by side (each takes 20-60 s to load on CPU)."""
    python = vllm_python()
    if python is None:
        raise SystemExit("perf/fleet.py needs vLLM: bash scripts/install --vllm")
    cores = os.cpu_count() or 1
    servers = []
    for index in range(count):
        # One core each where there are enough: two servers sharing every core would measure contention.
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = str(index % cores)
        server = VLLMServer(str(embedded_model_dir("smollm2-135m")), "smollm2", python=python,
                            args=["--max-model-len", "2048", "--enable-prefix-caching"])  # fmt: skip
        server.launch()
        servers.append(server)
    os.environ.pop("VLLM_CPU_OMP_THREADS_BIND", None)
    try:
        for server in servers:
            server.wait()
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return servers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=16)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--prefix-words", type=int, default=300)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--reverse", action="store_true", help="the rows in reverse order (is the order a bias?)")
    parser.add_argument("--smoke", action="store_true", help="a tiny run: that it works, not the figures")
    args = parser.parse_args()
    if args.smoke:
        args.problems, args.n, args.prefix_words, args.max_tokens = 4, 4, 60, 8
    servers = start_servers(2)
    try:
        urls = [s.url for s in servers]
        run_row(urls, "affinity", True, args, "warm-up")  # first requests compile and allocate
        plan = list(enumerate(ROWS))[::-1] if args.reverse else list(enumerate(ROWS))
        measured = {i: run_row(urls, routing, together, args, f"row{i}") for i, (routing, together) in plan}
        rows = [measured[i] for i in range(len(ROWS))]
    finally:
        for server in servers:
            server.stop()
    print(f"\n2 vLLM CPU servers · {args.problems} problems × {args.n} samples × 2 rounds · "
          f"~{args.prefix_words}-word prompts · {args.max_tokens} new tokens\n")  # fmt: skip
    header = "| routing | samples a request | wall s | completion tok/s | prompt tok asked | prefix-cached | computed |"
    print(header)
    print("|---|---|---|---|---|---|---|")
    base = rows[0]
    for row in rows:
        ratio = f" ({row.computed / base.computed:.2f}×)" if base.computed else ""
        print(
            f"| {row.routing} | {'n' if row.together else '1'} | {row.wall_s:.1f} | "
            f"{row.completion_tokens / row.wall_s:.1f} | {row.asked:,.0f} | {row.cached:,.0f} | "
            f"{row.computed:,.0f}{ratio} |"
        )


if __name__ == "__main__":
    main()
