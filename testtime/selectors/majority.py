"""`majority`: self-consistency. The largest class wins; ties follow an explicit, recorded policy (default
`earliest`: the class whose first member came first); no answer never wins. Math answers form classes by
the project's one equivalence relation; programs by their text (lines stripped)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from testtime.core.answers import majority_vote
from testtime.core.answers.vote import cluster_answers
from testtime.core.options import Options, flag
from testtime.core.records import Candidate, Problem
from testtime.core.seeds import problem_rng
from testtime.core.selection import CandidateScore, Selection, VoteEvidence
from testtime.selectors import SELECTORS, SelectionContext, Selector


class MajorityOptions(Options):
    tie_policy: Literal["earliest", "random"] = flag("earliest", "a tie between classes of one size: earliest | random")


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

    async def select(self, problem: Problem, candidates: Sequence[Candidate], ctx: SelectionContext) -> Selection:
        rng = ctx.rng or problem_rng(ctx.seed, problem.id)
        answers = [c.answer for c in candidates]
        classes = program_classes(answers) if problem.domain == "code" else None
        vote = majority_vote(answers, self.options.tie_policy, rng, classes)
        rule = f"majority(tie={self.options.tie_policy})"
        class_of = {i: cid for cid, members in enumerate(vote.clusters) for i in members}
        scores = tuple(
            CandidateScore(
                index=c.index,
                cluster=class_of.get(i),
                score=float(len(vote.clusters[class_of[i]])) if i in class_of else 0.0,
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
