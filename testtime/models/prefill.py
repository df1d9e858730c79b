"""Shared prefill: the KV cache of each distinct prompt computed once and copied to each of its samples.

n samples of one prompt need one prompt forward, not n (perf/hf_prefill.py: 0.58–0.64× the wall time of a prefill
per sample at n=8 on the embedded model). Used by the `hf:` backend and by TTRL's rollouts, which sample
N_vote completions of every prompt from the policy being trained. The `hf:` backend also keeps each prompt's cache
across batches (`PromptStore`): a vote drawn in waves (`--adaptive`) asks a problem's prompt again at every wave,
in batches of several problems' waves, whose prefills cost a batch of 8 prompts 16% more than one of 1.
"""

from __future__ import annotations

import inspect
from collections import OrderedDict
from typing import Any

PROMPT_STORE_BYTES = 256 << 20  # the embedded model's cache of a 100-token prompt is ~5 MB: some 50 prompts


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


class PromptStore:
    """Each distinct prompt's cache (all its tokens but the last, unpadded), kept across batches by its token ids,
    least recently used first out past `max_bytes`. A prompt's cache does not depend on what shares its batch: its
    positions come from its own attention mask, and padding is masked. Bound to one set of weights: whoever holds
    the store clears it when they change."""

    def __init__(self, max_bytes: int = PROMPT_STORE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._kept: OrderedDict[tuple[int, ...], list[tuple[Any, Any]]] = OrderedDict()
        self._bytes = 0
        self.hits = self.misses = 0

    def clear(self) -> None:
        self._kept.clear()
        self._bytes = 0

    def prefix(self, model: Any, input_ids: Any, attention_mask: Any, counts: Any) -> Any | None:
        """As `shared_prefix_cache`, with the prompts already seen taken from the store (None: this model's cache
        is not one this store can assemble, such as a sliding window's)."""
        import torch
        from transformers import DynamicCache

        width = input_ids.shape[1]
        keys = [tuple(row[mask == 1].tolist()) for row, mask in zip(input_ids, attention_mask, strict=True)]
        missing = [i for i, key in enumerate(keys) if key not in self._kept]
        if missing:
            computed = shared_prefix_cache(
                model, input_ids[missing], attention_mask[missing], torch.ones(len(missing), dtype=torch.long)
            )
            if any(layer.is_sliding for layer in computed.layers):
                return None
            for j, i in enumerate(missing):
                length = len(keys[i])  # the prompt's tokens, the last left out: positions width-length..width-2
                self._keep(keys[i], [(layer.keys[j, :, width - length : width - 1].clone(),
                                      layer.values[j, :, width - length : width - 1].clone())
                                     for layer in computed.layers])  # fmt: skip
        self.hits += len(keys) - len(missing)
        self.misses += len(missing)
        cache = DynamicCache(config=model.config)
        for index in range(len(self._kept[keys[0]])):
            first_keys, first_values = self._kept[keys[0]][index]
            shape = (len(keys), first_keys.shape[0], width - 1, first_keys.shape[-1])
            layer_keys = first_keys.new_zeros(shape)
            layer_values = first_values.new_zeros(shape)
            for row, key in enumerate(keys):
                kept_keys, kept_values = self._kept[key][index]
                layer_keys[row, :, width - 1 - kept_keys.shape[1] :] = kept_keys
                layer_values[row, :, width - 1 - kept_values.shape[1] :] = kept_values
            cache.update(layer_keys, layer_values, index)
        for key in keys:
            self._kept.move_to_end(key)
        cache.batch_select_indices(torch.arange(len(counts), device=counts.device).repeat_interleave(counts))
        return cache

    def _keep(self, key: tuple[int, ...], layers: list[tuple[Any, Any]]) -> None:
        self._kept[key] = layers
        self._bytes += sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)
        while self._bytes > self.max_bytes and len(self._kept) > 1:
            _, dropped = self._kept.popitem(last=False)
            self._bytes -= sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in dropped)


def generate_shared(
    model: Any, input_ids: Any, attention_mask: Any, counts: Any, store: PromptStore | None = None, **options: Any
) -> Any:
    """`model.generate` of `counts[i]` samples of left-padded prompt i, its prefill shared (and taken from
    `store` where it holds the prompt); returns the generated ids (prompts stripped), samples of one prompt
    consecutive."""
    import torch

    ids = input_ids.repeat_interleave(counts, dim=0)
    mask = attention_mask.repeat_interleave(counts, dim=0)
    with torch.inference_mode():
        cache = (
            store.prefix(model, input_ids, attention_mask, counts)
            if store is not None and input_ids.shape[1] > 1
            else None
        )
        if cache is not None:
            options[cache_argument(model)] = cache
        elif int(counts.max()) > 1 and input_ids.shape[1] > 1:
            options[cache_argument(model)] = shared_prefix_cache(model, input_ids, attention_mask, counts)
        output = model.generate(input_ids=ids, attention_mask=mask, **options)
    return output[:, ids.shape[1] :]


def through_end(row: list[int], end_ids: Any) -> list[int]:
    """A generated row up to and including its first end token (what follows is padding)."""
    end = next((i for i, token in enumerate(row) if token in end_ids), None)
    return row if end is None else row[: end + 1]
