"""TTRL's reward step, backend-neutral: a selector picks a class among N_vote samples, and each of the N_train
kept samples is rewarded by its agreement with that class. The TRL reward function and the verl hook both
call `vote`; the selector is the one the other methods use (the selection core), chosen by the domain:

- math: `majority`, the largest class of equivalent answers under the relation grading uses (TTRL's
  pseudo-label; reference ttrl.md §1). Reward 1 for a kept sample in that class.
- code: `execution`, behaviour classes over the public examples plus model-written inputs, run in the
  sandbox. Reward 1 for a kept sample in the selected class that also passes the public examples
  (`require_public`, default on), else 0.

Edge cases are explicit and recorded in the returned `TTRLVote` (the record `steps.jsonl` holds):
- a sample with no answer (no code, code that does not compile) abstains: it never joins a class, gets
  reward 0, and stays in the ratio's denominator;
- a prompt where every sample abstains is skipped (all rewards 0: no gradient);
- ties follow the selector's policy (`earliest` or seeded `random`) and are flagged;
- `min_majority_ratio`: a prompt whose selected class holds a smaller share is skipped.
Nothing here reads a reference: public examples are part of the statement.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

from testtime.core.answers import answer_key
from testtime.core.records import Completion, Problem
from testtime.core.results import TTRLVote
from testtime.core.selection import ExecutionEvidence, ReflectionEvidence, Selection
from testtime.methods import make_candidates
from testtime.selectors import SelectionContext, Selector

DOWNSAMPLE = ("first", "random")


@dataclass(frozen=True)
class VotePolicy:
    n_train: int | None = None  # samples kept for training; None = all N_vote
    downsample: str = "first"  # "first" N_train (TTRL v3) or a seeded "random" subset
    min_majority_ratio: float = 0.0
    require_public: bool = True  # code: a sample must also pass the public examples to earn reward

    def __post_init__(self) -> None:
        if self.downsample not in DOWNSAMPLE:
            raise ValueError(f"downsample must be one of {DOWNSAMPLE}, not {self.downsample!r}")
        if not 0.0 <= self.min_majority_ratio <= 1.0:
            raise ValueError("min_majority_ratio must lie in [0, 1]")
        if self.n_train is not None and self.n_train < 1:
            raise ValueError("n_train must be at least 1")


def keep(n_votes: int, policy: VotePolicy, rng: random.Random) -> list[int]:
    n_train = min(policy.n_train or n_votes, n_votes)
    return list(range(n_train)) if policy.downsample == "first" else sorted(rng.sample(range(n_votes), n_train))


async def vote(
    problem: Problem,
    texts: Sequence[str],
    selector: Selector,
    ctx: SelectionContext,
    policy: VotePolicy,
    rng: random.Random | None = None,
    kept: list[int] | None = None,
) -> TTRLVote:
    """Select over all `texts` (one per sample) and reward the kept ones (drawn here unless the caller drew
    them, knowing which samples it trains) by agreement with the selection."""
    if not texts:
        raise ValueError("a vote needs at least one sample")
    rng = rng or random.Random(0)
    kept = keep(len(texts), policy, rng) if kept is None else kept  # before the selection draws from rng
    candidates = make_candidates(problem, [Completion(text=t) for t in texts])
    selection = await selector.select(problem, candidates, replace(ctx, rng=rng))
    voted = reward_from(selection, problem, kept, policy, [c.answer for c in candidates])
    return voted.model_copy(update={"texts": tuple(texts)})


def reward_from(
    selection: Selection, problem: Problem, kept: list[int], policy: VotePolicy, answers: list[str | None]
) -> TTRLVote:
    abstained = frozenset(i for i in range(len(answers)) if selection.class_of(i) is None)
    skipped = None
    if selection.cluster is None:
        skipped = "all_abstain"
    elif selection.majority_ratio < policy.min_majority_ratio:
        skipped = "below_min_ratio"

    def earns(i: int) -> bool:
        if skipped or not selection.in_selected_class(i):
            return False
        return problem.domain != "code" or not policy.require_public or passes_public(selection, i)

    reflection = selection.evidence if isinstance(selection.evidence, ReflectionEvidence) else None
    score_of = {s.index: s.score for s in selection.scores}
    return TTRLVote(
        problem_id=problem.id,
        majority_label=reflection.majority_answer if reflection else None,
        label_differs=reflection.differs if reflection else None,
        label_fell_back=reflection.fell_back if reflection else None,
        label=selection.answer,
        label_key=label_key(selection, problem),
        majority_ratio=selection.majority_ratio,
        margin=selection.margin,
        tie=selection.tie,
        skipped=skipped,
        kept=tuple(kept),
        answers=tuple(answers[i] for i in kept),
        rewards=tuple(1.0 if earns(i) else 0.0 for i in kept),
        vote_rewards=tuple(1.0 if earns(i) else 0.0 for i in range(len(answers))),
        scores=tuple(score_of.get(i, 0.0) for i in range(len(answers))),
        classes=len({s.cluster for s in selection.scores if s.cluster is not None}),
        no_answer_rate=len(abstained) / len(answers),
        votes=tuple(answers),
        abstained=abstained,
        sandbox_seconds=selection.sandbox_seconds,
    )


def passes_public(selection: Selection, index: int) -> bool:
    """Whether candidate `index` passed every public example the execution selector ran it on."""
    evidence = selection.evidence
    if not isinstance(evidence, ExecutionEvidence):
        return True
    row = next((c for c in evidence.candidates if c.index == index), None)
    return row is not None and row.public_passed == evidence.suite.public


def label_key(selection: Selection, problem: Problem) -> str | None:
    """Math: the answer's canonical key. Code: a digest of the selected program's behaviour on the tests, so
    another program that behaves the same is the same label."""
    if selection.answer is None:
        return None
    evidence = selection.evidence
    if problem.domain != "code" or not isinstance(evidence, ExecutionEvidence):
        return answer_key(selection.answer)
    row = next((r for r in evidence.report if r.index == selection.index), None)
    behaviour = "|".join(f"{t.verdict}:{t.output}" for t in row.tests) if row else selection.answer
    return hashlib.sha256(behaviour.encode()).hexdigest()[:16]
