"""The TTRL vote on verl's batch type: group responses by `uid`, vote, write rewards into `rm_scores`.

Called at the group barrier (all responses of the batch are back). The reward sits on each response's last
valid token, as verl's reward managers place it. Per-sample extras (`ttrl_label`, `ttrl_majority_ratio`,
`ttrl_pred`) are added as non-tensor columns and listed in `meta_info["reward_extra_keys"]`, so verl logs
them beside its own metrics.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from statistics import mean
from typing import Any

from testtime.core.answers import extract_answer
from testtime.methods.ttrl.vote import VotePolicy, vote_step

EXTRA_KEYS = ("ttrl_label", "ttrl_majority_ratio", "ttrl_pred")


def apply_ttrl_vote(
    data: Any, uids: Sequence[str], tokenizer: Any, policy: VotePolicy, rng: random.Random | None = None
) -> dict[str, float]:
    """Vote within each uid group of the `DataProto` `data` (in place); returns label-free step metrics."""
    import numpy as np
    import torch

    responses = data.batch["responses"]
    prompt_len = data.batch["prompts"].shape[-1]
    lengths = data.batch["attention_mask"][:, prompt_len:].sum(dim=-1).tolist()
    if len(uids) != len(responses):
        raise ValueError(f"{len(uids)} uids for {len(responses)} responses")
    answers = [
        extract_answer(tokenizer.decode(responses[i][: lengths[i]], skip_special_tokens=True))
        for i in range(len(responses))
    ]
    groups: dict[str, list[int]] = {}
    for i, uid in enumerate(uids):
        groups.setdefault(str(uid), []).append(i)
    scores = torch.zeros_like(responses, dtype=torch.float32)
    labels: list[str] = [""] * len(responses)
    ratios = [0.0] * len(responses)
    votes = []
    for members in groups.values():
        vote = vote_step([answers[i] for i in members], policy, rng)
        votes.append(vote)
        for slot, reward in zip(vote.kept, vote.rewards, strict=True):
            i = members[slot]
            if lengths[i] > 0:
                scores[i, lengths[i] - 1] = reward
        for i in members:
            labels[i], ratios[i] = vote.label or "", vote.majority_ratio
    data.batch["rm_scores"] = scores
    data.non_tensor_batch["ttrl_label"] = np.array(labels, dtype=object)
    data.non_tensor_batch["ttrl_majority_ratio"] = np.array(ratios, dtype=np.float32)
    data.non_tensor_batch["ttrl_pred"] = np.array([a or "" for a in answers], dtype=object)
    known = list(data.meta_info.get("reward_extra_keys", []))
    data.meta_info["reward_extra_keys"] = known + [k for k in EXTRA_KEYS if k not in known]
    return {
        "ttrl/majority_ratio": mean(v.majority_ratio for v in votes),
        "ttrl/no_answer_rate": mean(v.no_answer_rate for v in votes),
        "ttrl/skipped_prompts": float(sum(v.skipped is not None for v in votes)),
    }
