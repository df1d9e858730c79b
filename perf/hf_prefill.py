"""The transformers backend's shared prefill against a prefill per sample, side by side in one run.

Majority, TTRL's evaluation and its rollouts ask n samples of one prompt; `generate_shared` computes each
prompt's KV cache once and copies it to its samples (the `hf:` backend merges the engine's one-sample requests
of a prompt first). Rows: P prompts × n samples of the miniature's few-shot arith prompt at T=1.0, M new
tokens, as one `generate_shared` call and as one plain `generate` of the P·n rows (a prefill each), at two
batch sizes. Goal: the shared prefill ≤ 0.8× the wall time at n=8.

Second table, what `--logprobs` costs: the same batches through `HFModel` as a run calls it, with and without
token statistics (one forward pass over each chunk of a prompt's samples after generating them, the prompt's KV
cache shared by the chunk). Goal: ≤ 1.5× the wall time without (re-encoding the prompt for every sample cost
1.7–2.0×).

    .venv/bin/python perf/hf_prefill.py [--n 8] [--tokens 32] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from testtime.benchmarks.arith import Arith
from testtime.core.records import SamplingParams
from testtime.methods.ttrl.rollouts import prompt_ids
from testtime.methods.ttrl.trl_reward import as_chat
from testtime.models.batching import BatchRow
from testtime.models.hf import HFModel, embedded_model_dir
from testtime.models.prefill import generate_shared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="a tiny size, to prove the script still runs (CI)")
    parser.add_argument(
        "--model", type=Path, default=None, help="a transformers folder in place of the embedded model (CI: a tiny one)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.n, args.tokens, args.repeats = 2, 4, 1
    path = args.model or embedded_model_dir("smollm2-135m")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    benchmark = Arith()
    problems, _ = benchmark.load()
    options = {
        "max_new_tokens": args.tokens,
        "min_new_tokens": args.tokens,  # every row decodes the same length in both layouts
        "do_sample": True,
        "temperature": 1.0,
        "top_p": 1.0,
        "top_k": 0,
        "pad_token_id": tokenizer.pad_token_id,
    }

    def shared(prompts: int) -> None:
        ids, mask = prompt_ids(tokenizer, [as_chat(benchmark.prompt(p)) for p in problems[:prompts]])
        generate_shared(model, ids, mask, torch.full((prompts,), args.n), **options)

    def each(prompts: int) -> None:
        ids, mask = prompt_ids(tokenizer, [as_chat(benchmark.prompt(p)) for p in problems[:prompts]])
        with torch.inference_mode():
            model.generate(
                input_ids=ids.repeat_interleave(args.n, 0), attention_mask=mask.repeat_interleave(args.n, 0), **options
            )

    backend = HFModel(str(path), name=f"hf:{path}")
    backend.load()
    loop = asyncio.new_event_loop()

    def sampled(prompts: int, logprobs: int | None) -> None:
        params = SamplingParams(temperature=1.0, max_tokens=args.tokens, seed=1, logprobs=logprobs)
        rows = [BatchRow(benchmark.prompt(p), args.n, params, loop.create_future()) for p in problems[:prompts]]
        out = backend._run_batch(rows)
        assert all((c.token_stats is not None) == (logprobs is not None) for group in out for c in group)

    table(args, "layout", {"shared prefill": shared, "a prefill per sample": each})
    table(args, "sampling", {"with --logprobs": lambda p: sampled(p, 0), "without": lambda p: sampled(p, None)})
    loop.close()


def table(args: argparse.Namespace, kind: str, runs: dict[str, Callable[[int], None]]) -> None:
    """Each way interleaved with the other at 16 and 64 rows, medians, the ratio to the last way."""
    sizes = (2, 8)  # prompts: 16 and 64 rows at n=8
    next(iter(runs.values()))(2)  # warm-up
    seconds: dict[tuple[int, str], list[float]] = {}
    for _ in range(args.repeats):
        for prompts in sizes:
            for name, run in runs.items():  # interleaved
                started = time.perf_counter()
                run(prompts)
                seconds.setdefault((prompts, name), []).append(time.perf_counter() - started)
    print(f"n={args.n}, up to {args.tokens} new tokens, median of {args.repeats}")
    print(f"{'rows':>5} {kind:24} {'wall s':>8} {'ms/sample':>10} {'ratio':>6}")
    for prompts in sizes:
        baseline = statistics.median(seconds[(prompts, list(runs)[-1])])
        for name in runs:
            wall = statistics.median(seconds[(prompts, name)])
            rows = prompts * args.n
            print(f"{rows:5} {name:24} {wall:8.2f} {1000 * wall / rows:10.0f} {wall / baseline:6.2f}")


if __name__ == "__main__":
    main()
