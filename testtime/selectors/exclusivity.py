"""`exclusivity`: TRT's math selection. A problem has one correct answer; answers that a later rollout
refuted with a stated reason are rejected, and the choice is made among the rest.

Rules (`rule=`):
- `support` (default, the paper's design): the non-rejected answer with the most rollouts behind it across
  all rounds so far; ties go to the incumbent (elitism: a round never drops its winner for an equal), then to
  the candidate that comes first in this round's (seeded, shuffled) order.
- `latest` (the released code's behaviour): this round's answer wins. With K > 1 rollouts, the most common
  non-rejected answer of this round, ties by order; if this round has none, the incumbent stays.
Answers are compared with the project's one equivalence relation; "no answer" never wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from testtime.core.answers import cluster_answers, equivalent
from testtime.core.errors import UserError
from testtime.core.records import Candidate, Problem, Selection
from testtime.selectors import SELECTORS, Selector

RULES = ("support", "latest")


@SELECTORS.register("exclusivity", help="TRT math: exclude refuted answers; most support across rounds (or latest)")
class ExclusivitySelector(Selector):
    name = "exclusivity"

    def __init__(self, rule: str = "support") -> None:
        if rule not in RULES:
            raise UserError(f"unknown exclusivity rule '{rule}'; available: {', '.join(RULES)}")
        self.rule = rule

    def select(self, problem: Problem, candidates: Sequence[Candidate], context: dict[str, Any]) -> Selection:
        """context: `rejected` (answers refuted so far), `support` ({answer: rollouts in earlier rounds}),
        `incumbent` (last round's selected answer or None)."""
        rejected: list[str] = context.get("rejected", [])
        history: dict[str, int] = context.get("support", {})
        incumbent: str | None = context.get("incumbent")

        def allowed(answer: str | None) -> bool:
            return answer is not None and not any(equivalent(answer, r) for r in rejected)

        # One pool: earlier rounds' representatives (weighted by their counts), then this round's answers.
        pool = [*history, *(c.answer for c in candidates)]
        weights = [*history.values(), *([1] * len(candidates))]
        clusters = cluster_answers(pool)
        this_round = [c for c in clusters if any(i >= len(history) for i in c)]
        eligible = [c for c in (this_round if self.rule == "latest" else clusters) if allowed(pool[c[0]])]
        rule = f"exclusivity({self.rule})"
        if not eligible:
            kept = incumbent if allowed(incumbent) else None
            return Selection(
                index=None,
                answer=kept,
                rule=rule,
                evidence={"reason": "no eligible answer this round", "kept_incumbent": kept is not None},
            )

        def score(cluster: list[int]) -> tuple[float, int, int]:
            count = sum(weights[i] for i in cluster if self.rule == "support" or i >= len(history))
            is_incumbent = incumbent is not None and equivalent(pool[cluster[0]], incumbent)
            first_now = min((i for i in cluster if i >= len(history)), default=len(pool))
            return (count, int(is_incumbent), -first_now)

        ranked = sorted(eligible, key=score, reverse=True)
        best = ranked[0]
        now = [i - len(history) for i in best if i >= len(history)]
        answer = candidates[now[0]].answer if now else pool[best[0]]
        top, runner_up = score(best)[0], (score(ranked[1])[0] if len(ranked) > 1 else 0)
        total = sum(weights)
        return Selection(
            index=candidates[now[0]].index if now else None,
            answer=answer,
            rule=rule,
            cluster_sizes=tuple(int(score(c)[0]) for c in ranked),
            majority_ratio=top / total if total else 0.0,
            margin=(top - runner_up) / total if total else 0.0,
            tie=len(ranked) > 1 and score(ranked[1])[0] == top,
            evidence={
                "rejected": list(rejected),
                "excluded": [pool[c[0]] for c in clusters if not allowed(pool[c[0]])],
                "support": {pool[c[0]]: int(score(c)[0]) for c in ranked},
            },
        )
