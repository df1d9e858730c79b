"""Shared prefill: the KV cache of each distinct prompt computed once and copied to each of its samples.

n samples of one prompt need one prompt forward, not n (perf/hf_prefill.py: 0.58–0.64× the wall time of a prefill
per sample at n=8 on the embedded model). Used by the `hf:` backend and by TTRL's rollouts, which sample
N_vote completions of every prompt from the policy being trained.
"""

from __future__ import annotations

import inspect
from typing import Any


def cache_argument(model: Any) -> str:
    """The forward's name for a KV cache: transformers 5.24 renamed `past_key_values` to `cache` (the old name
    warns); 5.19, vLLM's pin, has only the old one."""
    forward = inspect.signature(type(model).forward).parameters
    return "cache" if "cache" in forward else "past_key_values"


def shared_prefix_cache(model: Any, input_ids: Any, attention_mask: Any, counts: Any) -> Any:
    """The cache of `input_ids[:, :-1]` (left-padded distinct prompts), row i repeated `counts[i]` times.

    The last prompt token is left to `generate`, which continues from the cache with the positions it derives
    from the attention mask: the ones used here, so a padded row sees the positions it would see alone."""
    import torch
    from transformers import DynamicCache

    positions = (attention_mask.long().cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)
    cache = DynamicCache(config=model.config)
    model(
        input_ids=input_ids[:, :-1],
        attention_mask=attention_mask[:, :-1],
        position_ids=positions[:, :-1],
        use_cache=True,
        logits_to_keep=1,  # the prompt's logits are never read
        **{cache_argument(model): cache},
    )
    cache.batch_select_indices(torch.arange(len(counts), device=counts.device).repeat_interleave(counts))
    return cache


def generate_shared(model: Any, input_ids: Any, attention_mask: Any, counts: Any, **options: Any) -> Any:
    """`model.generate` of `counts[i]` samples of left-padded prompt i, its prefill shared; returns the
    generated ids (prompts stripped), samples of one prompt consecutive."""
    import torch

    ids = input_ids.repeat_interleave(counts, dim=0)
    mask = attention_mask.repeat_interleave(counts, dim=0)
    with torch.inference_mode():
        if int(counts.max()) > 1 and input_ids.shape[1] > 1:
            options[cache_argument(model)] = shared_prefix_cache(model, input_ids, attention_mask, counts)
        output = model.generate(input_ids=ids, attention_mask=mask, **options)
    return output[:, ids.shape[1] :]


def through_end(row: list[int], end_ids: Any) -> list[int]:
    """A generated row up to and including its first end token (what follows is padding)."""
    end = next((i for i, token in enumerate(row) if token in end_ids), None)
    return row if end is None else row[: end + 1]
