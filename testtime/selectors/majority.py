"""`majority`: self-consistency. The largest class wins; ties follow an explicit, recorded policy (default
`earliest`: the class whose first member came first); no answer never wins. Math answers form classes by
the project's one equivalence relation; programs by their text (lines stripped)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from testtime.core.answers import majority_vote
from testtime.core.answers.vote import cluster_answers
from testtime.core.options import Options, flag
from testtime.core.records import Candidate, Problem, TokenStats
from testtime.core.seeds import problem_rng
from testtime.core.selection import CandidateScore, Selection, VoteEvidence
from testtime.selectors import SELECTORS, SelectionContext, Selector


class MajorityOptions(Options):
    tie_policy: Literal["earliest", "random"] = flag("earliest", "a tie between classes of one size: earliest | random")
    weight: Literal["count", "confidence"] = flag(
        "count", "count (each sample one vote) | confidence (each weighed by its token confidence; needs --logprobs)"
    )
    keep: float = flag(
        1.0,
        "the most confident share of the answered samples that vote (DeepConf's filter: 0.9 high, 0.1 low; "
        "1 keeps all; below 1 needs --logprobs)",
        gt=0.0,
        le=1.0,
    )


def token_confidence(stats: TokenStats | None) -> float | None:
    """A sample's confidence from its token statistics: its self-certainty (KL(uniform ‖ p), DeepConf's token
    confidence in spirit: how peaked each next-token distribution was), else its mean token probability; None
    without statistics."""
    if stats is None:
        return None
    if stats.self_certainty is not None:
        return stats.self_certainty
    return math.exp(stats.logprob_mean) if stats.logprob_mean is not None else None


def program_classes(programs: Sequence[str | None]) -> list[list[int]]:
    """Indices of identical programs (lines stripped), in order of first appearance; no code is left out."""
    by_text: dict[str, list[int]] = {}
    for i, program in enumerate(programs):
        if program is not None:
            by_text.setdefault("\n".join(line.strip() for line in program.strip().splitlines()), []).append(i)
    return list(by_text.values())


@SELECTORS.register(
    "majority", help="largest class of equivalent answers (programs: identical text); ties: earliest|random"
)
class MajoritySelector(Selector):
    Options = MajorityOptions
    options: MajorityOptions

    def vote_classes(self, problem: Problem, answers: Sequence[str | None]) -> list[list[int]]:
        return program_classes(answers) if problem.domain == "code" else cluster_answers(answers)

    def needs_token_stats(self) -> bool:
        return self.options.weight == "confidence" or self.options.keep < 1.0

    def _weighed(self, candidates: Sequence[Candidate]) -> tuple[list[str | None], list[float] | None, str]:
        """The answers that vote (below the kept share of confidence, an answer abstains), their weights (None:
        counted), and the rule's name."""
        o, answers = self.options, [c.answer for c in candidates]
        rule = f"majority(tie={o.tie_policy})"
        if not self.needs_token_stats():
            return answers, None, rule
        confidence = [token_confidence(c.token_stats) if c.answer is not None else None for c in candidates]
        answered = sorted((i for i, v in enumerate(confidence) if v is not None), key=lambda i: -(confidence[i] or 0))
        kept = set(answered[: max(1, math.ceil(o.keep * len(answered)))]) if answered else set()
        answers = [a if i in kept else None for i, a in enumerate(answers)]
        weights = [confidence[i] or 0.0 if i in kept else 0.0 for i in range(len(candidates))]
        return answers, weights if o.weight == "confidence" else None, f"majority(weight={o.weight}, keep={o.keep:g})"

    async def select(self, problem: Problem, candidates: Sequence[Candidate], ctx: SelectionContext) -> Selection:
        rng = ctx.rng or problem_rng(ctx.seed, problem.id)
        answers, weights, rule = self._weighed(candidates)
        classes = program_classes(answers) if problem.domain == "code" else None
        vote = majority_vote(answers, self.options.tie_policy, rng, classes, weights)
        class_of = {i: cid for cid, members in enumerate(vote.clusters) for i in members}

        def weight(members: Sequence[int]) -> float:  # a class's votes: its size, or its confidence when weighed
            return float(len(members)) if weights is None else sum(weights[i] for i in members)

        scores = tuple(
            CandidateScore(
                index=c.index,
                cluster=class_of.get(i),
                score=weight(vote.clusters[class_of[i]]) if i in class_of else 0.0,
            )
            for i, c in enumerate(candidates)
        )
        if vote.winner is None:
            return Selection(
                selector=self.name,
                index=None,
                answer=None,
                rule=rule,
                scores=scores,
                evidence=VoteEvidence(reason="every candidate abstained"),
            )
        chosen = candidates[vote.clusters[vote.winner][0]]
        return Selection(
            selector=self.name,
            index=chosen.index,
            answer=vote.answer,
            rule=rule,
            cluster=vote.winner,
            cluster_sizes=tuple(len(c) for c in vote.clusters),
            majority_ratio=vote.majority_ratio,
            margin=vote.margin,
            tie=vote.tie,
            scores=scores,
            evidence=VoteEvidence(clusters=tuple(tuple(candidates[i].index for i in c) for c in vote.clusters)),
        )
