"""`exclusivity`: TRT's math selection. A problem has one correct answer; a rollout that refutes an answer (an
"[Error Report]" with a stated reason) is evidence against it, rollouts that conclude an answer are its
support, and the choice is made among the answers the evidence does not outweigh.

Rules (`rule=`):
- `support` (default, the paper's design): net(A) = rollouts that concluded A across all rounds so far, minus
  rollouts that refuted A. An answer is rejected when its net is negative (the evidence against it
  outweighs its support); the answer with the largest net wins, ties to the incumbent (elitism), then to the
  candidate that comes first in this round's (seeded, shuffled) order. The choice is never a rejected answer,
  and never nothing while some rollout has an answer (every refuting rollout concludes an answer of its own,
  so some net is at least zero).
- `latest` (the released code, exactly for K=1): this round's answer wins — with K > 1 the most common one,
  ties by order — refuted or not (the released code rejects answers only in the solvers' prompt); if this
  round has no answer, the incumbent stays.
Answers are compared with the project's one equivalence relation; "no answer" never wins. Earlier rounds
come in `ctx.history` (support, refutations, incumbent); without it this is a vote.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from testtime.core.answers import cluster_answers, equivalent
from testtime.core.options import Options, flag
from testtime.core.records import Candidate, Problem
from testtime.core.selection import CandidateScore, ExclusivityEvidence, Selection
from testtime.selectors import SELECTORS, SelectionContext, SelectionHistory, Selector


class ExclusivityOptions(Options):
    rule: Literal["support", "latest"] = flag("support", "support (the paper) | latest (the released code)")


@SELECTORS.register("exclusivity", help="TRT math: support minus refutations across rounds (or latest)")
class ExclusivitySelector(Selector):
    Options = ExclusivityOptions
    options: ExclusivityOptions
    domains = frozenset({"math"})  # refutations name answers; programs have none

    async def select(self, problem: Problem, candidates: Sequence[Candidate], ctx: SelectionContext) -> Selection:
        earlier = ctx.history or SelectionHistory()
        latest = self.options.rule == "latest"
        # One pool: earlier answers (weighted by the rollouts behind them), refuted-only answers, this round's.
        refuted_only = [a for a in earlier.refuted if not any(equivalent(a, s) for s in earlier.support)]
        history = [*earlier.support, *refuted_only]
        pool = [*history, *(c.answer for c in candidates)]
        weights = [*earlier.support.values(), *([0] * len(refuted_only)), *([1] * len(candidates))]
        clusters = cluster_answers(pool)
        class_of = {i: cid for cid, members in enumerate(clusters) for i in members}
        now = len(history)

        def support(cluster: list[int]) -> int:
            return sum(weights[i] for i in cluster if not latest or i >= now)

        def against(cluster: list[int]) -> int:
            return 0 if latest else sum(n for a, n in earlier.refuted.items() if equivalent(a, pool[cluster[0]]))

        def score(cluster: list[int]) -> tuple[int, int, int]:
            is_incumbent = earlier.incumbent is not None and equivalent(pool[cluster[0]], earlier.incumbent)
            first_now = min((i for i in cluster if i >= now), default=len(pool))
            return (support(cluster) - against(cluster), int(is_incumbent and not latest), -first_now)

        eligible = [c for c in clusters if support(c) > 0 and score(c)[0] >= 0]
        rejected = tuple(pool[c[0]] for c in clusters if score(c)[0] < 0)
        scores = tuple(
            CandidateScore(
                index=c.index,
                cluster=class_of.get(now + j),
                score=float(score(clusters[class_of[now + j]])[0]) if now + j in class_of else 0.0,
            )
            for j, c in enumerate(candidates)
        )
        evidence = ExclusivityEvidence(
            rejected=rejected,
            excluded=rejected,
            support={pool[c[0]]: support(c) for c in clusters if support(c)},
            refuted={pool[c[0]]: against(c) for c in clusters if against(c)},
        )
        rule = f"exclusivity({self.options.rule})"
        if not eligible:
            kept = earlier.incumbent if latest else None
            return Selection(
                selector=self.name,
                index=None,
                answer=kept,
                rule=rule,
                scores=scores,
                evidence=evidence.model_copy(
                    update={
                        "reason": "no answer this round" if latest else "no answer",
                        "kept_incumbent": kept is not None,
                    }
                ),
            )
        ranked = sorted(eligible, key=score, reverse=True)
        best = ranked[0]
        members_now = [i - now for i in best if i >= now]
        top = score(best)[0]
        total = sum(support(c) for c in clusters)
        return Selection(
            selector=self.name,
            index=candidates[members_now[0]].index if members_now else None,
            answer=candidates[members_now[0]].answer if members_now else pool[best[0]],
            rule=rule,
            cluster=clusters.index(best),
            cluster_sizes=tuple(support(c) for c in ranked),
            majority_ratio=support(best) / total if total else 0.0,
            margin=(top - (score(ranked[1])[0] if len(ranked) > 1 else 0)) / total if total else 0.0,
            tie=len(ranked) > 1 and score(ranked[1])[:2] == score(best)[:2],
            scores=scores,
            evidence=evidence,
        )
