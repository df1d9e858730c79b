"""Sampling in which each sequence of a batch draws from a generator of its own, seeded by that sample's seed.

`generate(do_sample=True)` draws every row from one global generator, so a sample depended on which other samples
shared its batch (and so on `--concurrency`). Here the next token of row i is drawn from `Generator(seed_i)` after
transformers' own temperature and top-p warpers; `generate` then runs greedy over scores that leave that token
alone. A sample is the same whatever its batch, up to float noise in batched logits (a draw that lands within
that noise of a boundary between two tokens).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def row_seeded_sampler(seeds: Sequence[int], temperature: float, top_p: float, device: Any) -> Any:
    """A logits processor that samples row i from its own generator; use with `do_sample=False`."""
    import torch
    from transformers import LogitsProcessor, TemperatureLogitsWarper, TopPLogitsWarper

    warpers = [TemperatureLogitsWarper(temperature)] + ([TopPLogitsWarper(top_p)] if top_p < 1.0 else [])
    generators = [torch.Generator(device=device).manual_seed(int(seed)) for seed in seeds]

    class RowSeededSampler(LogitsProcessor):
        def __call__(self, input_ids: Any, scores: Any) -> Any:
            for warp in warpers:
                scores = warp(input_ids, scores)
            probs = torch.softmax(scores.float(), dim=-1)
            chosen = torch.stack([torch.multinomial(probs[i], 1, generator=g)[0] for i, g in enumerate(generators)])
            picked = torch.full_like(scores, float("-inf"))
            picked[torch.arange(len(generators), device=scores.device), chosen] = 0.0
            return picked

    return RowSeededSampler()
