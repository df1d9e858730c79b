"""`majority`: equivalence-aware self-consistency. Largest cluster wins; ties follow an explicit, recorded
policy (default `earliest`: the cluster whose first member came first); no-answer never wins."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from testtime.core.answers import TIE_POLICIES, majority_vote
from testtime.core.errors import UserError
from testtime.core.records import Candidate, Problem, Selection
from testtime.selectors import SELECTORS, Selector


@SELECTORS.register("majority", help="largest cluster of equivalent answers; ties: earliest|random")
class MajoritySelector(Selector):
    name = "majority"

    def __init__(self, tie_policy: str = "earliest") -> None:
        if tie_policy not in TIE_POLICIES:
            raise UserError(f"unknown tie policy '{tie_policy}'; available: {', '.join(TIE_POLICIES)}")
        self.tie_policy = tie_policy

    def select(self, problem: Problem, candidates: Sequence[Candidate], context: dict[str, Any]) -> Selection:
        rng = random.Random(f"{context.get('seed', 0)}-{problem.id}")
        vote = majority_vote([c.answer for c in candidates], self.tie_policy, rng)
        rule = f"majority(tie={self.tie_policy})"
        if vote.winner is None:
            return Selection(index=None, answer=None, rule=rule, evidence={"reason": "every candidate abstained"})
        chosen = candidates[vote.clusters[vote.winner][0]]
        return Selection(
            index=chosen.index,
            answer=vote.answer,
            rule=rule,
            cluster_sizes=tuple(len(c) for c in vote.clusters),
            majority_ratio=vote.majority_ratio,
            margin=vote.margin,
            tie=vote.tie,
            evidence={"clusters": [[candidates[i].index for i in c] for c in vote.clusters]},
        )
