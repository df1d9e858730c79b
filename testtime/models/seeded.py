"""Sampling in which each sequence of a batch draws from a generator of its own, seeded by that sample's seed.

`generate(do_sample=True)` draws every row from one global generator, so a sample depended on which other samples
shared its batch (and so on `--concurrency`). Here the next token of row i is drawn from `Generator(seed_i)` after
transformers' own temperature and top-p warpers; `generate` then runs greedy over scores that leave that token
alone. A sample is the same whatever its batch, up to float noise in batched logits (a draw that lands within
that noise of a boundary between two tokens).

Each draw is torch's `multinomial` of one sample: an exponential per vocabulary entry (49k for the embedded
model), 27% of a 64-row batch's time on CPU, one row after another. On CPU the rows are split among torch's
threads (the generators are the rows' own, so the draws are the same): 71 → 38 ms a step of 64 rows on 2 cores.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any


@functools.cache
def _draw_pool(workers: int) -> ThreadPoolExecutor:
    """The process's threads for draws beside the caller's (created on first use, kept)."""
    return ThreadPoolExecutor(workers, thread_name_prefix="seeded-draws")


def row_seeded_sampler(seeds: Sequence[int], temperature: float, top_p: float, device: Any) -> Any:
    """A logits processor that samples row i from its own generator; use with `do_sample=False`."""
    import torch
    from transformers import LogitsProcessor, TemperatureLogitsWarper, TopPLogitsWarper

    warpers = [TemperatureLogitsWarper(temperature)] + ([TopPLogitsWarper(top_p)] if top_p < 1.0 else [])
    generators = [torch.Generator(device=device).manual_seed(int(seed)) for seed in seeds]
    parts = max(1, min(torch.get_num_threads(), len(generators))) if torch.device(device).type == "cpu" else 1
    first, *rest = itertools.pairwise([len(generators) * k // parts for k in range(parts + 1)])

    def draw(probs: Any, start: int, stop: int) -> list[Any]:
        return [torch.multinomial(probs[i], 1, generator=generators[i])[0] for i in range(start, stop)]

    class RowSeededSampler(LogitsProcessor):
        def __call__(self, input_ids: Any, scores: Any) -> Any:
            for warp in warpers:
                scores = warp(input_ids, scores)
            probs = torch.softmax(scores.float(), dim=-1)
            pending = [_draw_pool(parts - 1).submit(draw, probs, *span) for span in rest]
            chosen = torch.stack(draw(probs, *first) + [token for done in pending for token in done.result()])
            picked = torch.full_like(scores, float("-inf"))
            picked[torch.arange(len(generators), device=scores.device), chosen] = 0.0
            return picked

    return RowSeededSampler()
