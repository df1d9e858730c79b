"""GRPO's log-probabilities with each prompt's forward run once per batch, loss and gradient unchanged.

TRL scores a batch of (prompt, completion) rows by running every row whole. TTRL's rows are N_train samples of
a few prompts, and on the miniature 114 of each row's 146 tokens are the few-shot prompt. Under causal attention
a prompt's hidden states do not depend on what follows, so rows that share a prompt can share its forward: one
pass over each distinct prompt (with autograd), its KV cache indexed out to the rows, then every row's completion
on top. Backward sums each row's gradient into the shared pass, so the loss and gradient are TRL's own (tests
compare both on the embedded model). Positions follow TRL's forward (no position ids: each row's columns,
padding included), so a padded row gets exactly TRL's numbers too.

Anything this does not cover runs TRL's own method: multimodal inputs, MoE auxiliary losses, gradient
checkpointing (its recomputation would append to the cache a second time).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from testtime.models.prefill import cache_argument


def shared_prompt_logps(
    model: Any, input_ids: Any, attention_mask: Any, logits_to_keep: int, compute_entropy: bool
) -> tuple[Any, Any]:
    """Per-token log-probabilities (and entropies) of the last `logits_to_keep` columns, as TRL's fused head
    returns them (zero where masked), with one prompt forward per distinct prompt among the rows."""
    import torch
    from transformers import DynamicCache

    width = input_ids.size(1) - logits_to_keep  # the prompt's columns, left-padded alike for a shared prompt
    prompts = torch.cat([input_ids[:, :width], attention_mask[:, :width]], dim=1)
    distinct, row_prompt = torch.unique(prompts, dim=0, return_inverse=True)
    cache = DynamicCache(config=model.config)
    name = cache_argument(model)
    model(
        input_ids=distinct[:, : width - 1],
        attention_mask=distinct[:, width : 2 * width - 1],
        use_cache=True,
        logits_to_keep=1,
        **{name: cache},
    )
    cache.batch_select_indices(row_prompt)  # differentiable indexing: backward sums the rows' gradients
    labels = input_ids[:, width:].masked_fill(attention_mask[:, width:] == 0, -100)
    outputs = model(
        input_ids=input_ids[:, width - 1 : -1],  # the last prompt token predicts the first completion token
        attention_mask=attention_mask[:, :-1],
        shift_labels=labels,
        fused_lm_head=True,
        **{name: cache},
    )
    return outputs.log_probs, outputs.entropy if compute_entropy else None


def shared_prompt_trainer(base: type) -> type:
    """`base` (TRL's GRPOTrainer) with `shared_prompt_logps` where it applies."""

    class SharedPromptGRPOTrainer(base):  # type: ignore[valid-type, misc]
        def _get_per_token_logps_and_entropies(
            self,
            model: Any,
            input_ids: Any,
            attention_mask: Any,
            logits_to_keep: int,
            batch_size: int | None = None,
            compute_entropy: bool = False,
            compute_aux_loss: bool = False,
            **multimodal: Any,
        ) -> tuple[Any, Any, Any]:
            width = input_ids.size(1) - logits_to_keep
            if (
                compute_aux_loss
                or self.args.gradient_checkpointing
                or width < 2
                or any(value is not None for value in multimodal.values())
            ):
                return super()._get_per_token_logps_and_entropies(
                    model,
                    input_ids,
                    attention_mask,
                    logits_to_keep,
                    batch_size,
                    compute_entropy,
                    compute_aux_loss,
                    **multimodal,
                )
            return _chunked(
                lambda ids, mask: shared_prompt_logps(model, ids, mask, logits_to_keep, compute_entropy),
                input_ids,
                attention_mask,
                batch_size or input_ids.size(0),
                self.accelerator.autocast,
            )

    return SharedPromptGRPOTrainer


def _chunked(score: Callable[[Any, Any], tuple[Any, Any]], ids: Any, mask: Any, size: int, autocast: Any) -> Any:
    """TRL's memory bound: rows in chunks of `size` (its old-policy pass scores a whole generation batch)."""
    import torch

    logps, entropies = [], []
    for start in range(0, ids.size(0), size):
        with autocast():
            chunk_logps, chunk_entropy = score(ids[start : start + size], mask[start : start + size])
        logps.append(chunk_logps)
        entropies.append(chunk_entropy)
    entropy = torch.cat(entropies) if entropies[0] is not None else None
    return torch.cat(logps), entropy, None
