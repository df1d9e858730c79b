"""TTRL's vote step, backend-neutral: vote → pseudo-label → downsample → per-sample rewards.

TTRL is a label-rewrite step, not a reward that sees the group (reference ttrl.md §1): N_vote answers decide
the label with the same equivalence relation grading uses (`core.answers.majority_vote`), then each of the
N_train kept samples is rewarded 1 if it is in the winning cluster, else 0. The TRL and verl backends call
this one function. Edge cases are explicit and recorded in the returned `PromptVote`:

- a sample with no answer abstains: it never votes, gets reward 0, and stays in the ratio's denominator;
- a prompt where every sample abstains is skipped (all rewards 0: no gradient);
- ties follow the majority selector's policy (`earliest` or seeded `random`) and are flagged;
- `min_majority_ratio`: a prompt whose winner holds a smaller share is skipped rather than trained on.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from testtime.core.answers import answer_key, majority_vote
from testtime.core.answers.vote import TIE_POLICIES

DOWNSAMPLE = ("first", "random")


@dataclass(frozen=True)
class VotePolicy:
    n_train: int | None = None  # samples kept for training; None = all N_vote
    downsample: str = "first"  # "first" N_train (TTRL v3) or a seeded "random" subset
    tie_policy: str = "earliest"
    min_majority_ratio: float = 0.0

    def __post_init__(self) -> None:
        if self.downsample not in DOWNSAMPLE:
            raise ValueError(f"downsample must be one of {DOWNSAMPLE}, not {self.downsample!r}")
        if self.tie_policy not in TIE_POLICIES:
            raise ValueError(f"tie policy must be one of {TIE_POLICIES}, not {self.tie_policy!r}")
        if not 0.0 <= self.min_majority_ratio <= 1.0:
            raise ValueError("min_majority_ratio must lie in [0, 1]")
        if self.n_train is not None and self.n_train < 1:
            raise ValueError("n_train must be at least 1")


@dataclass(frozen=True)
class PromptVote:
    label: str | None  # a raw representative of the winning cluster (never a canonicalised form)
    label_key: str | None  # its canonical key, for flip tracking and logs
    majority_ratio: float  # winner size / N_vote, abstains included
    margin: float
    no_answer_rate: float
    tie: bool
    skipped: str | None  # "all_abstain" | "below_min_ratio" | None
    kept: list[int] = field(default_factory=list)  # indices into the voted samples, in training order
    rewards: list[float] = field(default_factory=list)  # one per kept sample


def vote_step(answers: Sequence[str | None], policy: VotePolicy, rng: random.Random | None = None) -> PromptVote:
    """Vote over all `answers` (one per sample, None = no answer) and reward the kept ones."""
    if not answers:
        raise ValueError("vote_step needs at least one sample")
    rng = rng or random.Random(0)
    n_train = min(policy.n_train or len(answers), len(answers))
    kept = list(range(n_train)) if policy.downsample == "first" else sorted(rng.sample(range(len(answers)), n_train))
    vote = majority_vote(answers, policy.tie_policy, rng)
    no_answer_rate = sum(a is None for a in answers) / len(answers)
    skipped = None
    if vote.winner is None:
        skipped = "all_abstain"
    elif vote.majority_ratio < policy.min_majority_ratio:
        skipped = "below_min_ratio"
    winners = set() if skipped or vote.winner is None else set(vote.clusters[vote.winner])
    return PromptVote(
        label=vote.answer,
        label_key=answer_key(vote.answer) if vote.answer is not None else None,
        majority_ratio=vote.majority_ratio,
        margin=vote.margin,
        no_answer_rate=no_answer_rate,
        tie=vote.tie,
        skipped=skipped,
        kept=kept,
        rewards=[1.0 if i in winners else 0.0 for i in kept],
    )
