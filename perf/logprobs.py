"""What `--logprobs` costs on the `hf:` backend: the same batches sampled with and without token statistics,
interleaved in one run.

With `--logprobs` the backend runs one forward pass over each prompt's samples after generating them (the full
distribution at every completion token: chosen log-prob, entropy, self-certainty), the prompt encoded once per
chunk of samples. Rows: P prompts × n samples of the arith prompt at T=1.0, M new tokens, through `HFModel` as a
run calls it. Goal: ≤ 1.5× the wall time without (re-encoding the prompt for every sample cost 1.7–2.0×).

    .venv/bin/python perf/logprobs.py [--n 8] [--tokens 32] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from testtime.benchmarks.arith import Arith
from testtime.core.records import SamplingParams
from testtime.models.batching import BatchRow
from testtime.models.hf import HFModel, embedded_model_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="a tiny size, to prove the script still runs (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.n, args.tokens, args.repeats = 2, 4, 1
    model = HFModel(str(embedded_model_dir("smollm2-135m")), name="hf:smollm2-135m")
    model.load()
    benchmark = Arith()
    problems, _ = benchmark.load()
    loop = asyncio.new_event_loop()

    def batch(prompts: int, logprobs: int | None) -> float:
        params = SamplingParams(temperature=1.0, max_tokens=args.tokens, seed=1, logprobs=logprobs)
        rows = [BatchRow(benchmark.prompt(p), args.n, params, loop.create_future()) for p in problems[:prompts]]
        started = time.perf_counter()
        out = model._run_batch(rows)
        wall = time.perf_counter() - started
        assert all((c.token_stats is not None) == (logprobs is not None) for group in out for c in group)
        return wall

    sizes = (2, 8)  # prompts: 16 and 64 rows at n=8
    batch(2, None)  # warm-up
    seconds: dict[tuple[int, str], list[float]] = {}
    for _ in range(args.repeats):
        for prompts in sizes:
            for name, logprobs in (("with --logprobs", 0), ("without", None)):  # interleaved
                seconds.setdefault((prompts, name), []).append(batch(prompts, logprobs))
    loop.close()
    print(f"n={args.n}, up to {args.tokens} new tokens, median of {args.repeats}")
    print(f"{'rows':>5} {'sampling':18} {'wall s':>8} {'ms/sample':>10} {'ratio':>6}")
    for prompts in sizes:
        baseline = statistics.median(seconds[(prompts, "without")])
        for name in ("with --logprobs", "without"):
            wall = statistics.median(seconds[(prompts, name)])
            rows = prompts * args.n
            print(f"{rows:5} {name:18} {wall:8.2f} {1000 * wall / rows:10.0f} {wall / baseline:6.2f}")


if __name__ == "__main__":
    main()
