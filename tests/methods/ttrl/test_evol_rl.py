"""The novelty reward is EVOL-RL's (arXiv 2509.15194) as its released reward manager computes it. `paper_rewards`
restates that manager's steps one by one, in its own order (invalid answers out; per-sample group mean and global
max of the clipped similarity; novelty normalised within each group; then rescaled into the group's reward range,
with its special cases), on a given similarity matrix; ours must give the same reward to every sample, so the same
order, on many random matrices, votes and abstentions."""

from __future__ import annotations

import random

import numpy as np
import pytest

from testtime.core.results import TTRLVote
from testtime.methods.ttrl.rewards import NOVELTY_MIX, evol_rl_rewards, novelty_reward


def paper_rewards(similarity: np.ndarray, base: list[float], valid: list[bool]) -> list[float]:
    n = len(base)
    if n <= 1:
        return list(base)
    invalid = [i for i in range(n) if not valid[i]]
    if invalid:
        out = [-1.0] * n
        if len(invalid) == n:
            return out
        keep = [i for i in range(n) if valid[i]]
        if len(keep) <= 1:
            return out
        inner = paper_grouped(similarity[np.ix_(keep, keep)], [base[i] for i in keep])
        for k, i in enumerate(keep):
            out[i] = inner[k]
        return out
    return paper_grouped(similarity, base)


def paper_grouped(raw: np.ndarray, base: list[float]) -> list[float]:
    sim = np.clip(raw, 0.0, 1.0)
    n = len(base)
    correct = [i for i in range(n) if base[i] > 0]
    incorrect = [i for i in range(n) if base[i] <= 0]
    novelty = np.zeros(n)
    for i in range(n):
        group = [j for j in (correct if base[i] > 0 else incorrect) if j != i]
        everyone = [j for j in range(n) if j != i]
        if group:
            average = np.mean([sim[i, j] for j in group])
        elif everyone:
            average = np.mean([sim[i, j] for j in everyone])
        else:
            average = 0.5
        largest = np.max([sim[i, j] for j in everyone]) if everyone else 0.5
        novelty[i] = 1.0 - (0.5 * average + 0.5 * largest)
    for group in (correct, incorrect):  # normalised within each group
        if len(group) > 1:
            low, high = novelty[group].min(), novelty[group].max()
            if high > low:
                novelty[group] = (novelty[group] - low) / (high - low)
        elif group:
            novelty[group] = 0.5
    final = np.zeros(n)
    for group, floor, midpoint, alone in ((correct, 0.5, 0.75, 1.0), (incorrect, -1.0, -0.75, -0.5)):
        if len(group) > 1:
            low, high = novelty[group].min(), novelty[group].max()
            for i in group:
                final[i] = floor + 0.5 * (novelty[i] - low) / (high - low) if high > low else midpoint
        elif group:
            final[group[0]] = alone
    return final.tolist()


def _random_case(rng: random.Random) -> tuple[np.ndarray, list[bool], list[bool]]:
    n = rng.choice([2, 3, 5, 8, 16, 64])
    vectors = np.array([[rng.gauss(0, 1) for _ in range(6)] for _ in range(n)])
    vectors[rng.randrange(n)] = vectors[0]  # a duplicate: ties in the maxima
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cosines = unit @ unit.T  # negative cosines included: the clip must matter
    agree = [rng.random() < 0.6 for _ in range(n)]
    valid = [rng.random() < 0.85 for _ in range(n)]
    return cosines, agree, valid


def test_ours_equals_the_papers_reward_on_random_similarity_matrices() -> None:
    rng = random.Random(2509)
    for _ in range(400):
        cosines, agree, valid = _random_case(rng)
        theirs = paper_rewards(cosines, [1.0 if a else 0.0 for a in agree], valid)
        ours = evol_rl_rewards(np.clip(cosines, 0.0, 1.0), agree, valid)
        assert ours == pytest.approx(theirs, abs=1e-12)
        assert np.argsort(ours, kind="stable").tolist() == np.argsort(theirs, kind="stable").tolist()


def test_a_side_of_one_earns_its_best_and_no_answer_the_floor() -> None:
    cosines = np.array([[1.0, 0.2, 0.9], [0.2, 1.0, 0.1], [0.9, 0.1, 1.0]])
    assert evol_rl_rewards(cosines, [True, False, True], [True, True, True])[1] == -0.5  # the lone dissenter
    assert evol_rl_rewards(cosines, [True, False, False], [True, True, True])[0] == 1.0  # the lone agreeing one
    assert evol_rl_rewards(cosines, [True, True, False], [True, False, False]) == [-1.0, -1.0, -1.0]  # one left
    assert NOVELTY_MIX == 0.5


def _vote(texts: list[str], agree: list[bool], kept: list[int], abstained: frozenset[int] = frozenset()) -> TTRLVote:
    answers = tuple(None if i in abstained else "3" for i in range(len(texts)))
    return TTRLVote(
        problem_id="p",
        label="3",
        majority_ratio=0.5,
        kept=tuple(kept),
        answers=tuple(answers[i] for i in kept),
        rewards=tuple(1.0 if agree[i] else 0.0 for i in kept),
        vote_rewards=tuple(1.0 if a else 0.0 for a in agree),
        votes=answers,
        abstained=abstained,
        texts=tuple(texts),
    )


def test_every_vote_is_scored_and_the_trained_ones_take_theirs() -> None:
    """Four votes, two trained: the trained samples' novelty is measured against all four, as the paper does."""
    vectors = {"a": [1.0, 0.0], "b": [0.6, 0.8], "c": [0.0, 1.0], "d": [0.8, 0.6]}
    texts, agree = ["a", "b", "c", "d"], [True, True, True, False]
    embed = lambda batch: [vectors[t] for t in batch]  # noqa: E731
    trained = novelty_reward(vote=_vote(texts, agree, kept=[0, 1]), embed=embed)
    every = evol_rl_rewards(
        np.clip(np.array([vectors[t] for t in texts]) @ np.array([vectors[t] for t in texts]).T, 0, 1),
        agree,
        [True] * 4,
    )
    assert trained == pytest.approx(every[:2])
    alone = novelty_reward(vote=_vote(texts[:2], agree[:2], kept=[0, 1]), embed=embed)
    assert trained != pytest.approx(alone)  # the two untrained votes changed the trained ones' rewards


def test_the_text_after_think_is_compared_and_negative_cosines_count_as_zero() -> None:
    seen: list[list[str]] = []

    def embed(batch: list[str]) -> list[list[float]]:
        seen.append(batch)
        return [[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]]

    vote = _vote(["<think>long musing</think> It is 3.", "It is 3.", "<think>a</think><think>b</think> 3"],
                 [True, True, True], kept=[0, 1, 2])  # fmt: skip
    rewards = novelty_reward(vote=vote, embed=embed)
    assert seen == [[" It is 3.", "It is 3.", " 3"]]
    # the cosine of samples 0 and 1 is −1, clipped to 0: as unlike as 0 and 2, not less alike than unrelated
    assert rewards == pytest.approx(
        evol_rl_rewards(np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1.0]]), [True] * 3, [True] * 3)
    )
