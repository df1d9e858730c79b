"""Equivalence-aware majority vote: the one implementation behind the majority selector, maj@k metrics
and TTRL's pseudo-label. No-answer samples abstain: they never form a cluster and never win.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from testtime.core.answers.equivalence import answer_key, equivalent, exact_structure

TIE_POLICIES = ("earliest", "random")


def cluster_answers(answers: Sequence[str | None]) -> list[list[int]]:
    """Indices grouped by equivalent answer, in order of first appearance; None answers are left out."""
    by_key: dict[str, list[int]] = {}
    representative: dict[str, str] = {}
    for i, answer in enumerate(answers):
        if answer is None:
            continue
        key = answer_key(answer)
        by_key.setdefault(key, []).append(i)
        representative.setdefault(key, answer)
    clusters: list[tuple[str, list[int]]] = []
    for key, members in by_key.items():
        # Distinct exact keys are surely different; only symbolic forms need the slow check.
        home = next(
            (
                c
                for c in clusters
                if not (exact_structure(c[0]) and exact_structure(key))
                and equivalent(representative[c[0]], representative[key])
            ),
            None,
        )
        if home is None:
            clusters.append((key, list(members)))
        else:
            home[1].extend(members)
    return [sorted(members) for _, members in clusters]


@dataclass(frozen=True)
class Vote:
    clusters: list[list[int]]  # ordered by size (desc), then first appearance
    winner: int | None  # index into clusters; None when every sample abstained
    answer: str | None  # the winning cluster's first member's answer
    majority_ratio: float  # winner size / all samples (abstains included)
    margin: float  # (winner - runner-up) / all samples
    tie: bool  # the winner's size was shared and the tie policy decided


def majority_vote(
    answers: Sequence[str | None],
    tie_policy: str = "earliest",
    rng: random.Random | None = None,
    clusters: Sequence[Sequence[int]] | None = None,
    weights: Sequence[float] | None = None,
) -> Vote:
    """The vote over `answers`; `clusters` (indices per class) replaces the equivalence relation where
    another one applies (programs: identical text); `weights` (one a sample) weigh each vote instead of counting
    it (a confidence-weighted vote), and the ratios are then shares of the total weight."""
    if tie_policy not in TIE_POLICIES:
        raise ValueError(f"tie policy must be one of {TIE_POLICIES}, not {tie_policy!r}")
    found = cluster_answers(answers) if clusters is None else [sorted(c) for c in clusters]

    def size(members: Sequence[int]) -> float:
        return len(members) if weights is None else sum(weights[i] for i in members)

    ranked = sorted(found, key=lambda c: (-size(c), c[0]))
    if not ranked:
        return Vote([], None, None, 0.0, 0.0, False)
    top = size(ranked[0])
    tied = [i for i, c in enumerate(ranked) if size(c) == top]
    winner = (rng or random.Random(0)).choice(tied) if tie_policy == "random" else tied[0]
    runner_up = max((size(c) for i, c in enumerate(ranked) if i != winner), default=0)
    total = len(answers) if weights is None else sum(weights) or 1.0
    return Vote(ranked, winner, answers[ranked[winner][0]], top / total, (top - runner_up) / total, len(tied) > 1)
