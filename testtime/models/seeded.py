"""Sampling in which each sequence of a batch draws from a generator of its own, seeded by that sample's seed.

`generate(do_sample=True)` draws every row from one global generator, so a sample depended on which other samples
shared its batch (and so on `--concurrency`). Here the next token of row i is drawn from `Generator(seed_i)` after
transformers' own temperature and top-p warpers; `generate` then runs greedy over scores that leave that token
alone. A sample is the same whatever its batch, up to float noise in batched logits (a draw that lands within
that noise of a boundary between two tokens).

Each draw is torch's `multinomial` of one sample: an exponential per vocabulary entry (49k for the embedded
model), 27% of a 64-row batch's time on CPU, one row after another. On CPU the rows are split among torch's
threads (the generators are the rows' own, so the draws are the same): 71 → 38 ms a step of 64 rows on 2 cores.

A batch may mix settings: each row has its own temperature and top-p, and a greedy row (no seed) takes its
highest score. So a problem's greedy answer shares a batch, and its prompt's prefill, with its samples.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any


@functools.cache
def _draw_pool(workers: int) -> ThreadPoolExecutor:
    """The process's threads for draws beside the caller's (created on first use, kept)."""
    return ThreadPoolExecutor(workers, thread_name_prefix="seeded-draws")


@dataclass(frozen=True)
class RowDraw:
    """How one row picks its next token: from `Generator(seed)` at its temperature and top-p; None: greedy."""

    seed: int | None
    temperature: float = 1.0
    top_p: float = 1.0


def row_seeded_sampler(rows: Sequence[RowDraw], device: Any) -> Any:
    """A logits processor that picks row i's token as `rows[i]` says; use with `do_sample=False`."""
    import torch
    from transformers import LogitsProcessor, TemperatureLogitsWarper, TopPLogitsWarper

    seeds = {i: row.seed for i, row in enumerate(rows) if row.seed is not None}
    sampled, greedy = list(seeds), [i for i, row in enumerate(rows) if row.seed is None]
    settings: dict[tuple[float, float], list[int]] = {}  # rows warped alike, warped together
    for i in sampled:
        settings.setdefault((rows[i].temperature, rows[i].top_p), []).append(i)
    warps = [
        (torch.tensor(where, device=device), [TemperatureLogitsWarper(t)] + ([TopPLogitsWarper(p)] if p < 1.0 else []))
        for (t, p), where in settings.items()
    ]
    generators = {i: torch.Generator(device=device).manual_seed(int(seed)) for i, seed in seeds.items()}
    parts = max(1, min(torch.get_num_threads(), len(sampled))) if torch.device(device).type == "cpu" else 1
    first, *rest = (sampled[a:b] for a, b in itertools.pairwise([len(sampled) * k // parts for k in range(parts + 1)]))

    def probabilities(input_ids: Any, scores: Any) -> Any:
        probs = torch.empty_like(scores, dtype=torch.float32)
        for where, warpers in warps:
            warped = scores[where]
            for warp in warpers:
                warped = warp(input_ids[where], warped)
            probs[where] = torch.softmax(warped.float(), dim=-1)
        return probs

    def draw(probs: Any, indices: list[int]) -> list[Any]:
        return [torch.multinomial(probs[i], 1, generator=generators[i])[0] for i in indices]

    class RowSeededSampler(LogitsProcessor):
        def __call__(self, input_ids: Any, scores: Any) -> Any:
            chosen = torch.empty(len(rows), dtype=torch.long, device=scores.device)
            if greedy:
                chosen[greedy] = scores[greedy].argmax(dim=-1)
            if sampled:
                probs = probabilities(input_ids, scores)
                pending = [_draw_pool(parts - 1).submit(draw, probs, indices) for indices in rest]
                tokens = draw(probs, first) + [token for done in pending for token in done.result()]
                chosen[sampled] = torch.stack(tokens)
            picked = torch.full_like(scores, float("-inf"))
            picked[torch.arange(len(rows), device=scores.device), chosen] = 0.0
            return picked

    return RowSeededSampler()
