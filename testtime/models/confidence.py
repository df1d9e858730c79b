"""A sample's token statistics under the model that wrote it, from one forward pass over prompt and completion.

Per completion token, from the distribution p the sample was drawn from: the model's logits at the sampling
temperature T (softmax(logits / T); top-p, which only truncates, is not applied), T recorded with the statistics:
- the chosen token's log-probability,
- the entropy H(p) = −Σ p log p (RENT / EM-style rewards train on its negative mean),
- the self-certainty KL(U ‖ p) = −log V − mean_j log p_j (Intuitor, arXiv 2505.19590),
each averaged over the completion's tokens (through its end token). Computed in row chunks so a batch of long
completions never holds every position's logits at once. Used by TTRL's confidence rewards
(`methods/ttrl/rewards.py`) and by the `hf:` backend for a run with `--logprobs`.

A server reports only the k likeliest tokens of each position (`top_logprobs`): `top_stats` takes those,
renormalised, for the entropy and the self-certainty (KL(U_k ‖ p̃) over those k), marked `top_k=k`; the chosen
token's log-probability is the server's own, exact.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from testtime.core.records import TokenStats

CHUNK_ROWS = 8


def completion_stats(
    model: Any, prompt: Sequence[int], completions: Sequence[Sequence[int]], temperature: float = 1.0
) -> list[TokenStats]:
    """Statistics of each completion of one prompt (token ids, end token included where there is one), under
    the distribution at `temperature` (the one that drew them; greedy samples are read at 1). The
    prompt is encoded once per chunk and its KV cache shared by the chunk's rows (`prefill.py`): re-encoding a
    few-shot prompt for every sample cost 1.7–2.0× the sampling itself (perf/hf_prefill.py, second table)."""
    import torch

    from testtime.models.prefill import cache_argument, shared_prefix_cache

    stats: list[TokenStats] = []
    past = len(prompt) - 1  # the prompt's last token is fed with the completion: its logits predict the first
    for start in range(0, len(completions), CHUNK_ROWS):
        rows = list(completions[start : start + CHUNK_ROWS])
        longest = max((len(r) for r in rows), default=0)
        if longest == 0:
            stats += [TokenStats(tokens=0) for _ in rows]
            continue
        pad = 0
        ids = torch.tensor([[prompt[-1], *r, *([pad] * (longest - len(r)))] for r in rows], device=model.device)
        mask = torch.ones(len(rows), past + 1 + longest, dtype=torch.long, device=model.device)
        for i, r in enumerate(rows):
            mask[i, past + 1 + len(r) :] = 0  # right padding: no real token attends to it
        options: dict[str, Any] = {"position_ids": torch.arange(past, past + 1 + longest, device=model.device)[None]}
        with torch.inference_mode():
            if past:
                whole = torch.tensor([list(prompt)], device=model.device)
                counts = torch.tensor([len(rows)], device=model.device)
                options[cache_argument(model)] = shared_prefix_cache(model, whole, torch.ones_like(whole), counts)
            # the logits that predicted each completion token: the prompt's last position … the row's end - 1
            logits = model(input_ids=ids, attention_mask=mask, **options).logits[:, :-1].float() / temperature
        logp = torch.log_softmax(logits, dim=-1)
        chosen = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
        entropy = -(logp.exp() * logp).sum(-1)
        certainty = -math.log(logp.shape[-1]) - logp.mean(-1)
        for i, r in enumerate(rows):
            n = len(r)
            stats.append(
                TokenStats(
                    tokens=n,
                    logprob_mean=float(chosen[i, :n].mean()) if n else None,
                    entropy_mean=float(entropy[i, :n].mean()) if n else None,
                    self_certainty=float(certainty[i, :n].mean()) if n else None,
                    temperature=temperature,
                )
            )
    return stats


def top_stats(chosen: Sequence[float], alternatives: Sequence[Sequence[float]], k: int) -> TokenStats:
    """Statistics of one sample from a server's log-probs: per token, the chosen token's and the k likeliest
    alternatives' (k = 0: the chosen ones only; then no entropy or self-certainty)."""
    n = len(chosen)
    if n == 0:
        return TokenStats(tokens=0, top_k=k)
    entropies, certainties = [], []
    for row in alternatives:
        top = sorted(row, reverse=True)[:k] if k else []
        if len(top) < 2:  # one alternative (or none) carries no spread to measure
            continue
        peak = max(top)
        total = peak + math.log(sum(math.exp(v - peak) for v in top))
        renormalised = [v - total for v in top]
        entropies.append(-sum(math.exp(v) * v for v in renormalised))
        certainties.append(-math.log(len(top)) - sum(renormalised) / len(top))
    covered = k >= 2 and len(entropies) == n  # every position reported: else the means would skew
    return TokenStats(
        tokens=n,
        logprob_mean=sum(chosen) / n,
        entropy_mean=sum(entropies) / n if covered else None,
        self_certainty=sum(certainties) / n if covered else None,
        top_k=k,
    )
