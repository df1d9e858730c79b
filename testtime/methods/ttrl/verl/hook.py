"""The TTRL reward step on verl's batch type: group responses by `uid`, run the selection reward
(`vote.vote`, the one TRL uses), write rewards into `rm_scores`.

Called at the group barrier (all responses of the batch are back). verl trains every response it generated
(`rollout.n`), so TTRL's vote on more responses than it trains (the paper: 64 voted, 32 trained) is done by
sampling the difference at the barrier: `vote_only_batch` asks the rollout for `n_vote - n_train` more
responses per prompt, which join the vote (`vote_only`) and are then dropped; only the trained ones get
rewards. They are a fresh draw from the same policy, so the trained responses are a uniform subset of the
voted ones, as TTRL's downsampling makes them. The reward sits on each response's last
valid token, as verl's reward managers place it. Per-sample extras (`ttrl_label`, `ttrl_majority_ratio`,
`ttrl_pred`) are added as non-tensor columns and listed in `meta_info["reward_extra_keys"]`, so verl logs
them beside its own metrics. Each row's problem (its domain; for code its public examples) comes from the
parquet's `extra_info`, never its ground truth.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Sequence
from statistics import mean
from typing import Any

from testtime.core.records import Problem
from testtime.core.results import TTRLVote
from testtime.methods.ttrl.rewards import TrainedReward
from testtime.methods.ttrl.verl.record import Row
from testtime.methods.ttrl.vote import VotePolicy, vote
from testtime.selectors import SelectionContext, Selector

EXTRA_KEYS = ("ttrl_label", "ttrl_majority_ratio", "ttrl_pred")


def apply_ttrl_vote(
    data: Any,
    uids: Sequence[str],
    problems: Sequence[Problem],
    tokenizer: Any,
    policy: VotePolicy,
    selector: Selector,
    context: Callable[[Problem], SelectionContext] = lambda _: SelectionContext(),
    rng: random.Random | None = None,
    trained: TrainedReward | None = None,
    vote_only: dict[str, list[str]] | None = None,
) -> tuple[dict[str, float], list[TTRLVote]]:
    """Vote within each uid group of the `DataProto` `data` (in place), beside the group's `vote_only`
    responses (voted, never trained); returns label-free step metrics and the votes, a group each."""
    import numpy as np
    import torch

    responses = data.batch["responses"]
    texts, lengths = decoded(data, tokenizer)
    if not len(uids) == len(problems) == len(responses):
        raise ValueError(f"{len(uids)} uids and {len(problems)} problems for {len(responses)} responses")
    extra = vote_only or {}
    groups: dict[str, list[int]] = {}
    for i, uid in enumerate(uids):
        groups.setdefault(str(uid), []).append(i)
    rng = rng or random.Random(0)

    async def all_votes() -> list[TTRLVote]:
        return list(
            await asyncio.gather(
                *(
                    vote(
                        problems[m[0]],
                        [texts[i] for i in m] + extra.get(uid, []),
                        selector,
                        context(problems[m[0]]),
                        policy,
                        rng,
                        kept=list(range(len(m))) if uid in extra else None,  # the trained ones, first
                    )
                    for uid, m in groups.items()
                )
            )
        )

    votes = asyncio.run(all_votes())  # verl calls from its own thread, with no event loop of ours
    votes = trained.apply(votes) if trained is not None else votes
    scores = torch.zeros_like(responses, dtype=torch.float32)
    labels: list[str] = [""] * len(responses)
    ratios = [0.0] * len(responses)
    predictions = [""] * len(responses)
    for members, prompt_vote in zip(groups.values(), votes, strict=True):
        for slot, reward in zip(prompt_vote.kept, prompt_vote.rewards, strict=True):
            i = members[slot]
            if lengths[i] > 0:
                scores[i, lengths[i] - 1] = reward
        for slot, i in enumerate(members):
            labels[i], ratios[i] = prompt_vote.label or "", prompt_vote.majority_ratio
            predictions[i] = prompt_vote.votes[slot] or ""
    data.batch["rm_scores"] = scores
    data.non_tensor_batch["ttrl_label"] = np.array(labels, dtype=object)
    data.non_tensor_batch["ttrl_majority_ratio"] = np.array(ratios, dtype=np.float32)
    data.non_tensor_batch["ttrl_pred"] = np.array(predictions, dtype=object)
    known = list(data.meta_info.get("reward_extra_keys", []))
    data.meta_info["reward_extra_keys"] = known + [k for k in EXTRA_KEYS if k not in known]
    metrics = {
        "ttrl/majority_ratio": mean(v.majority_ratio for v in votes),
        "ttrl/no_answer_rate": mean(v.no_answer_rate for v in votes),
        "ttrl/skipped_prompts": float(sum(v.skipped is not None for v in votes)),
        "ttrl/distinct_classes": mean(v.classes for v in votes),
        "ttrl/vote_only_responses": float(sum(len(texts) for texts in extra.values())),
    }
    return metrics, votes


def decoded(data: Any, tokenizer: Any) -> tuple[list[str], list[int]]:
    """Each response's text and its valid length (tokens before the padding)."""
    responses = data.batch["responses"]
    prompt_len = data.batch["prompts"].shape[-1]
    lengths = data.batch["attention_mask"][:, prompt_len:].sum(dim=-1).tolist()
    return [
        tokenizer.decode(responses[i][: lengths[i]], skip_special_tokens=True) for i in range(len(responses))
    ], lengths


def token_rows(data: Any, problems: Sequence[Problem]) -> list[Row]:
    """Each response's problem, its prompt's tokens and its own (the attention mask's, padding excluded)."""
    prompt_len = data.batch["prompts"].shape[-1]
    prompts = data.batch["attention_mask"][:, :prompt_len].sum(dim=-1).tolist()
    completions = data.batch["attention_mask"][:, prompt_len:].sum(dim=-1).tolist()
    return [Row(p.id, int(n), int(m)) for p, n, m in zip(problems, prompts, completions, strict=True)]


def vote_only_batch(batch: Any, uids: Sequence[str], extra: int) -> Any:
    """The rollout input for `extra` more responses per prompt: each uid group's first row, repeated as verl
    repeats (interleaved, so a prompt's rows stay together and keep their uid)."""
    firsts, seen = [], set()
    for i, uid in enumerate(uids):
        if str(uid) not in seen:
            seen.add(str(uid))
            firsts.append(i)
    return batch.select_idxs(firsts).repeat(repeat_times=extra, interleave=True)


def texts_by_uid(data: Any, uids: Sequence[str], tokenizer: Any) -> dict[str, list[str]]:
    texts, _ = decoded(data, tokenizer)
    grouped: dict[str, list[str]] = {}
    for uid, text in zip(uids, texts, strict=True):
        grouped.setdefault(str(uid), []).append(text)
    return grouped
