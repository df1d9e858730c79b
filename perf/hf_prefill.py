"""The transformers backend's cost per sample, with and without a shared prefill, side by side in one run.

Majority and TTRL's evaluation ask n samples of one prompt; the backend computes that prompt's KV cache once
and copies it to each sample. Rows: the same batch (P prompts × n samples, the miniature's few-shot arith
prompt, T=1.0, M new tokens) generated as P rows of n (shared prefill) and as P·n rows of one (a prefill
each). Goal: the shared prefill ≤ 0.8× the wall time at n=8 (decoding, not the prefill, is most of a
batch's time on CPU: 0.79× measured with a training run beside it).

    .venv/bin/python perf/hf_prefill.py [--prompts 2] [--n 8] [--tokens 32] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from testtime.benchmarks.arith import Arith
from testtime.core.records import SamplingParams
from testtime.models.batching import BatchRow
from testtime.models.hf import build_hf


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    benchmark = Arith()
    problems, _ = benchmark.load()
    conversations = [benchmark.prompt(p) for p in problems[: args.prompts]]
    model = build_hf("smollm2-135m")
    model.load()
    params = SamplingParams(temperature=1.0, max_tokens=args.tokens, seed=0)
    loop = asyncio.new_event_loop()

    def rows(n_per_row: int, copies: int) -> list[BatchRow]:
        return [BatchRow(c, n_per_row, params, loop.create_future()) for c in conversations for _ in range(copies)]

    layouts = {"shared prefill (P rows of n)": rows(args.n, 1), "a prefill per sample (P·n rows of 1)": rows(1, args.n)}
    model._run_batch(layouts["shared prefill (P rows of n)"])  # warm-up
    seconds: dict[str, list[float]] = {name: [] for name in layouts}
    for _ in range(args.repeats):
        for name, batch in layouts.items():  # interleaved, so both see the same machine
            started = time.perf_counter()
            model._run_batch(batch)
            seconds[name].append(time.perf_counter() - started)
    samples = args.prompts * args.n
    baseline = statistics.median(seconds["a prefill per sample (P·n rows of 1)"])
    print(f"{args.prompts} prompts × n={args.n}, {args.tokens} new tokens, median of {args.repeats}")
    print(f"{'layout':40} {'wall s':>8} {'ms/sample':>10} {'ratio':>6}")
    for name, values in seconds.items():
        wall = statistics.median(values)
        print(f"{name:40} {wall:8.2f} {1000 * wall / samples:10.0f} {wall / baseline:6.2f}")
    loop.close()


if __name__ == "__main__":
    main()
