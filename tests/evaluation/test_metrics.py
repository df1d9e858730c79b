"""Metrics: maj@k is the exact expectation over k-subsets; the Monte Carlo path agrees; CIs cover."""

from __future__ import annotations

import itertools
import random

import pytest

from testtime.core.answers import majority_vote
from testtime.evaluation import metrics
from testtime.evaluation.metrics import bootstrap_ci, maj_at_k, powers_of_two_upto


def brute_force_maj(answers: list[str | None], gold: str, k: int) -> float:
    subsets = list(itertools.combinations(range(len(answers)), k))
    return sum(majority_vote([answers[i] for i in s]).answer == gold for s in subsets) / len(subsets)


def clusters_of(answers: list[str | None], gold: str) -> tuple[list[int], list[bool]]:
    labels = sorted({a for a in answers if a is not None}, key=answers.index)
    return [labels.index(a) if a is not None else -1 for a in answers], [label == gold for label in labels]


@pytest.mark.parametrize("seed", range(6))
def test_maj_at_k_equals_the_vote_over_every_subset(seed: int) -> None:
    rng = random.Random(seed)
    answers = [rng.choice(["1", "2", "3", None]) for _ in range(8)]
    cluster_of, cluster_correct = clusters_of(answers, "1")
    for k in (1, 2, 3, 4, 8):
        assert maj_at_k(cluster_of, cluster_correct, k) == pytest.approx(brute_force_maj(answers, "1", k))


def test_maj_at_1_is_the_mean_sample_accuracy() -> None:
    answers = ["1", "2", "1", None, "3"]
    cluster_of, cluster_correct = clusters_of(answers, "1")
    assert maj_at_k(cluster_of, cluster_correct, 1) == pytest.approx(2 / 5)


def test_monte_carlo_path_matches_the_exact_value(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(0)
    answers = [rng.choice(["1", "1", "2", "3", None]) for _ in range(12)]
    cluster_of, cluster_correct = clusters_of(answers, "1")
    exact = maj_at_k(cluster_of, cluster_correct, 5)
    monkeypatch.setattr(metrics, "EXACT_SUBSETS", 0)
    assert maj_at_k(cluster_of, cluster_correct, 5) == pytest.approx(exact, abs=0.03)


def test_bootstrap_interval_brackets_the_mean() -> None:
    values = [1.0] * 30 + [0.0] * 70
    low, high = bootstrap_ci(values)
    assert low < 0.3 < high and high - low < 0.25


def test_powers_of_two() -> None:
    assert powers_of_two_upto(12) == [1, 2, 4, 8]
    assert powers_of_two_upto(1) == [1]
