"""Metrics: maj@k is the exact expectation over k-subsets; the Monte Carlo path agrees; CIs cover."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from testtime.evaluation import metrics
from testtime.evaluation.metrics import bootstrap_ci, maj_at_k, powers_of_two_upto


def brute_force_maj(answers: list[str | None], gold: str, k: int) -> float:
    """Every k-subset voted by hand; a tie between the largest classes earns the correct share of them."""
    subsets = list(itertools.combinations(range(len(answers)), k))
    total = 0.0
    for subset in subsets:
        counts = Counter(answers[i] for i in subset if answers[i] is not None)
        if counts:
            top = max(counts.values())
            tied = [a for a, c in counts.items() if c == top]
            total += tied.count(gold) / len(tied)
    return total / len(subsets)


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


def test_maj_at_k_does_not_depend_on_the_order_of_the_samples() -> None:
    """Ties used to go to the earliest sample, so reordering the same samples moved maj@k; now a tie earns
    the correct share of the tied classes, whatever the order."""
    answers = ["1", "2", "2", "1", "3", None]
    values = set()
    for order in itertools.permutations(range(len(answers))):
        shuffled = [answers[i] for i in order]
        cluster_of, cluster_correct = clusters_of(shuffled, "1")
        values.add(round(maj_at_k(cluster_of, cluster_correct, 2), 12))
    assert len(values) == 1
    assert values.pop() == pytest.approx(brute_force_maj(answers, "1", 2))


def test_a_tie_earns_the_correct_share() -> None:
    assert maj_at_k([0, 1], [True, False], 2) == 0.5  # one vote each: half a correct vote
    assert maj_at_k([0, 1, 2, -1], [True, False, False], 4) == pytest.approx(1 / 3)


def test_a_share_of_a_gain_gets_a_paired_interval_and_none_of_no_gain() -> None:
    from testtime.evaluation.metrics import paired_ratio_ci

    same = paired_ratio_ci([0.5, 0.0, 1.0], [0.5, 0.0, 1.0])
    assert same is not None and (same.interval.mean, same.interval.ci_low, same.interval.ci_high) == (1.0, 1.0, 1.0)
    half = paired_ratio_ci([0.5, 0.5, 0.0, 0.5], [1.0, 1.0, 0.5, 0.5], seed=3)
    assert half is not None and half.interval.mean == pytest.approx(0.5)
    assert half.interval.ci_low < 0.5 < half.interval.ci_high and half.undefined == 0.0
    assert paired_ratio_ci([0.5], [0.0]) is None and paired_ratio_ci([], []) is None  # the oracle gained nothing


def test_resamples_without_an_oracle_gain_are_counted_not_dropped_silently() -> None:
    from testtime.evaluation.metrics import paired_ratio_ci

    # one problem of four carries the oracle's whole gain: a resample without it (0.75^4 ≈ 0.32) has no ratio
    share = paired_ratio_ci([1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], seed=1)
    assert share is not None and 0.25 < share.undefined < 0.40
