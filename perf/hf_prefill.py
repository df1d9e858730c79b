"""The transformers backend's shared prefill against a prefill per sample, side by side in one run.

Majority, TTRL's evaluation and its rollouts ask n samples of one prompt; `generate_shared` computes each
prompt's KV cache once and copies it to its samples (the `hf:` backend merges the engine's one-sample requests
of a prompt first). Rows: P prompts × n samples of the miniature's few-shot arith prompt at T=1.0, M new
tokens, as one `generate_shared` call and as one plain `generate` of the P·n rows (a prefill each), at two
batch sizes. Goal: the shared prefill ≤ 0.8× the wall time at n=8.

    .venv/bin/python perf/hf_prefill.py [--n 8] [--tokens 32] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from testtime.benchmarks.arith import Arith
from testtime.methods.ttrl.reward import as_chat
from testtime.methods.ttrl.rollouts import prompt_ids
from testtime.models.hf import embedded_model_dir
from testtime.models.prefill import generate_shared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="a tiny size, to prove the script still runs (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.n, args.tokens, args.repeats = 2, 4, 1
    path = embedded_model_dir("smollm2-135m")
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

    sizes = (2, 8)  # prompts: 16 and 64 rows at n=8
    shared(2)  # warm-up
    seconds: dict[tuple[int, str], list[float]] = {}
    for _ in range(args.repeats):
        for prompts in sizes:
            for name, run in (("shared prefill", shared), ("a prefill per sample", each)):  # interleaved
                started = time.perf_counter()
                run(prompts)
                seconds.setdefault((prompts, name), []).append(time.perf_counter() - started)
    print(f"n={args.n}, {args.tokens} new tokens, median of {args.repeats}")
    print(f"{'rows':>5} {'layout':24} {'wall s':>8} {'ms/sample':>10} {'ratio':>6}")
    for prompts in sizes:
        baseline = statistics.median(seconds[(prompts, "a prefill per sample")])
        for name in ("shared prefill", "a prefill per sample"):
            wall = statistics.median(seconds[(prompts, name)])
            rows = prompts * args.n
            print(f"{rows:5} {name:24} {wall:8.2f} {1000 * wall / rows:10.0f} {wall / baseline:6.2f}")


if __name__ == "__main__":
    main()
