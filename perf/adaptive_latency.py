"""What adaptive waves cost a request's latency on an API: each wave is a round trip. A served endpoint
(`testtime serve --n 16`) in front of a scripted OpenAI-compatible server with a fixed latency per call, asked the
same questions fixed, adaptive at the default waves (4, then 2 at a time), and adaptive with a first wave of 8 and
one more wave of 8 (at most two round trips): each request's latency at the client, p50 and p90, the samples its
vote drew, and the waves it took.

The scripted server answers a question's samples with its "true" answer with a probability set per question (0.9,
0.7, 0.5, in turn; else one of three others): votes that settle fast, slowly, and not at all.

    .venv/bin/python perf/adaptive_latency.py              # 24 questions, 0.3 s a call
    .venv/bin/python perf/adaptive_latency.py --smoke      # 6 questions, 0.05 s
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai

from testtime.models.mock_server import MockChatServer

AGREEMENT = (0.9, 0.7, 0.5)
SETTINGS = {
    "fixed": [],
    "adaptive (4, then 2)": ["--adaptive"],
    "adaptive (8, then 8)": ["--adaptive", "--adaptive-min", "8", "--adaptive-wave", "8"],
}


def scripted() -> Any:
    lock, rng = threading.Lock(), random.Random(0)

    def reply(messages: list[dict[str, Any]]) -> str:
        numbers = [int(x) for x in re.findall(r"\d+", messages[-1]["content"])]
        question = numbers[0] if numbers else 0
        with lock:
            draw = rng.random()
            other = rng.choice((1, 2, 3))
        agreement = AGREEMENT[question % len(AGREEMENT)]
        return f"The answer is \\boxed{{{question if draw < agreement else question + other}}}."

    return reply


def serve(upstream: str, out: Path, extra: list[str]) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "testtime.cli", "serve", "--model", "openai:mock", "--api-base", upstream,
         "--domain", "math", "--n", "16", "--port", "0", "--out", str(out), "--quiet", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def measure(url: str, questions: int) -> list[tuple[float, int]]:
    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=600)

    def one(i: int) -> tuple[float, int]:
        started = time.perf_counter()
        reply = client.chat.completions.create(
            model="openai:mock", messages=[{"role": "user", "content": f"Question {i}: what is it?"}]
        )
        stop = (reply.model_extra or {}).get("testtime", {}).get("adaptive")
        return time.perf_counter() - started, stop["drawn"] if stop else 16

    with ThreadPoolExecutor(4) as pool:  # four clients at once
        return list(pool.map(one, range(questions)))


def waves(drawn: int, first: int, wave: int) -> int:
    return 1 if drawn <= first else 1 + -(-(drawn - first) // wave)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=24)
    parser.add_argument("--latency", type=float, default=0.3, help="seconds a scripted call takes")
    parser.add_argument("--smoke", action="store_true", help="6 questions, 0.05 s a call")
    args = parser.parse_args()
    if args.smoke:
        args.questions, args.latency = 6, 0.05
    shapes = {"fixed": (16, 16), "adaptive (4, then 2)": (4, 2), "adaptive (8, then 8)": (8, 8)}
    print(f"{args.questions} requests, 4 at a time, --n 16, a scripted call takes {args.latency:g} s")
    print(f"{'votes':24s} {'p50 s':>6s} {'p90 s':>6s} {'samples':>8s} {'waves p50':>9s} {'<= 2 waves':>10s}")
    with MockChatServer(reply=scripted(), latency_s=args.latency) as upstream, tempfile.TemporaryDirectory() as scratch:
        for name, extra in SETTINGS.items():
            process, url = serve(upstream.url, Path(scratch) / name.replace(" ", "-"), extra)
            try:
                measured = measure(url, args.questions)
            finally:
                process.terminate()
                process.wait(timeout=120)
            latencies = sorted(latency for latency, _ in measured)
            drawn = [d for _, d in measured]
            first, wave = shapes[name]
            taken = [waves(d, first, wave) for d in drawn]
            p90 = latencies[min(len(latencies) - 1, int(0.9 * len(latencies)))]
            print(f"{name:24s} {statistics.median(latencies):6.2f} {p90:6.2f} {statistics.mean(drawn):8.1f} "
                  f"{statistics.median(taken):9.1f} {sum(t <= 2 for t in taken) / len(taken):10.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
