"""A TTRL rollout step's three costs on the embedded model, TRL's way and ours, side by side in one run.

The miniature's step (`--preset cpu`): 4 prompts × 16 votes, 8 of each trained, 32 new tokens, 4 optimiser
steps of 8 rows. Rows:
- rollouts: TRL's `generate` of the 32 trained rows plus the 32 extra votes as a second batch (every row its
  own prefill) against `shared_rollouts` (all 64 in one batch, one prefill per prompt);
- old-policy log-probs of the 32 rows (no gradient): TRL's row-by-row forward against `shared_prompt_logps`;
- one optimiser step's forward and backward on 8 rows drawn from the 4 prompts (TRL shuffles before it
  splits): the same two.
Goal: the step's total at ≤ 0.5× TRL's way, so the miniature fits 12 minutes (a step was ~120 s).

    .venv/bin/python perf/ttrl_step.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig
from trl import GRPOTrainer
from trl.trainer.utils import add_fused_lm_head

from testtime.benchmarks.arith import Arith
from testtime.methods.ttrl.rollouts import prompt_ids, shared_rollouts
from testtime.methods.ttrl.shared_prompt import shared_prompt_logps
from testtime.methods.ttrl.trl_reward import as_chat
from testtime.models.hf import embedded_model_dir

PROMPTS, VOTES, TRAINED, TOKENS = 4, 16, 8, 32


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=TOKENS, help="new tokens per rollout (the miniature's: 32)")
    parser.add_argument("--smoke", action="store_true", help="a tiny size, to prove the script still runs (CI)")
    parser.add_argument(
        "--model", type=Path, default=None, help="a transformers folder in place of the embedded model (CI: a tiny one)"
    )
    args = parser.parse_args()
    if args.smoke:
        args.repeats, args.tokens = 1, 4
    path = args.model or embedded_model_dir("smollm2-135m")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).train()
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    benchmark = Arith()
    problems, _ = benchmark.load()
    conversations = [as_chat(benchmark.prompt(p)) for p in problems[:PROMPTS]]
    sampling = GenerationConfig(
        do_sample=True, temperature=1.0, top_p=1.0, top_k=0, max_new_tokens=args.tokens,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    trainer = SimpleNamespace(
        processing_class=tokenizer,
        model=model,
        accelerator=SimpleNamespace(unwrap_model=lambda m: m, autocast=contextlib.nullcontext, is_main_process=True),
        generation_config=sampling,
        eos_token_ids=[tokenizer.eos_token_id],
    )
    ids, mask = prompt_ids(tokenizer, conversations)
    repeated = [c for c in conversations for _ in range(TRAINED)]
    batch = shared_rollouts(repeated, trainer, n_train=TRAINED, n_vote=VOTES)
    rows, row_mask, width = _rows(ids, mask, batch["completion_ids"], tokenizer.pad_token_id)
    step = torch.randperm(len(rows), generator=torch.Generator().manual_seed(0))[:TRAINED]

    def trl_rollouts() -> None:
        with torch.no_grad():
            for _ in range(2):  # the trained rows, then the extra votes: each row prefilled by itself
                model.generate(
                    input_ids=ids.repeat_interleave(TRAINED, 0),
                    attention_mask=mask.repeat_interleave(TRAINED, 0),
                    generation_config=sampling,
                )

    def trl_scores(r: Any, m: Any) -> Any:
        return GRPOTrainer._get_per_token_logps_and_entropies(trainer, model, r, m, width, compute_entropy=True)[:2]

    def shared_scores(r: Any, m: Any) -> Any:
        return shared_prompt_logps(model, r, m, width, compute_entropy=True)

    def our_rollouts() -> None:
        shared_rollouts(repeated, trainer, n_train=TRAINED, n_vote=VOTES)

    chosen = rows[step], row_mask[step]
    phases: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
        f"rollouts ({PROMPTS}×{VOTES})": (trl_rollouts, our_rollouts),
        f"old log-probs ({len(rows)} rows)": (
            _no_grad(trl_scores, rows, row_mask),
            _no_grad(shared_scores, rows, row_mask),
        ),
        f"update fwd+bwd ({TRAINED} rows)": (
            _backward(model, trl_scores, *chosen),
            _backward(model, shared_scores, *chosen),
        ),
    }
    seconds: dict[str, list[list[float]]] = {name: [[], []] for name in phases}
    for _ in range(args.repeats):
        for name, ways in phases.items():  # interleaved, so both ways see the same machine
            for way, run in enumerate(ways):
                started = time.perf_counter()
                run()
                seconds[name][way].append(time.perf_counter() - started)
    print(f"median of {args.repeats}; a rollout step = rollouts + old log-probs + {PROMPTS} updates")
    print(f"{'phase':32} {'TRL s':>8} {'ours s':>8} {'ratio':>6}")
    totals = [0.0, 0.0]
    for name, (trl, ours) in seconds.items():
        times = statistics.median(trl), statistics.median(ours)
        weight = PROMPTS if name.startswith("update") else 1
        totals = [totals[0] + weight * times[0], totals[1] + weight * times[1]]
        print(f"{name:32} {times[0]:8.2f} {times[1]:8.2f} {times[1] / times[0]:6.2f}")
    print(f"{'rollout step':32} {totals[0]:8.2f} {totals[1]:8.2f} {totals[1] / totals[0]:6.2f}")


def _rows(ids: Any, mask: Any, completions: list[list[int]], pad: int) -> tuple[Any, Any, int]:
    """TRL's training rows: left-padded prompt, right-padded completion; returns them and the completion width."""
    width = max(len(c) for c in completions)
    completion = torch.full((len(completions), width), pad)
    completion_mask = torch.zeros((len(completions), width), dtype=torch.long)
    for i, c in enumerate(completions):
        completion[i, : len(c)], completion_mask[i, : len(c)] = torch.tensor(c), 1
    prompt, prompt_mask = ids.repeat_interleave(TRAINED, 0), mask.repeat_interleave(TRAINED, 0)
    return torch.cat([prompt, completion], 1), torch.cat([prompt_mask, completion_mask], 1), width


def _no_grad(score: Callable[[Any, Any], Any], rows: Any, mask: Any) -> Callable[[], Any]:
    def run() -> Any:
        with torch.no_grad():
            return [score(rows[i : i + TRAINED], mask[i : i + TRAINED]) for i in range(0, len(rows), TRAINED)]

    return run


def _backward(model: Any, score: Callable[[Any, Any], Any], rows: Any, mask: Any) -> Callable[[], None]:
    def run() -> None:
        model.zero_grad()
        logps, _ = score(rows, mask)
        logps.sum().backward()

    return run


if __name__ == "__main__":
    main()
