"""Metrics over graded samples: pass@1 (avg@k: the mean accuracy of k samples), unbiased maj@k, intervals.

One interval method per kind of quantity: Wilson for a proportion of 0/1 outcomes (accuracy), the percentile
bootstrap over problems for means of fractional values (pass@1, maj@k), the paired bootstrap for differences.

maj@k is the expected accuracy of a majority vote over a uniformly random k-subset of the n samples,
computed exactly by enumeration when there are few subsets and by seeded Monte Carlo otherwise. Votes follow
the same policy as `core.answers.majority_vote` (largest cluster, then earliest; abstains never win).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Sequence
from typing import Literal

from testtime.core.answers import cluster_answers
from testtime.core.records import Record

EXACT_SUBSETS = 20_000
MONTE_CARLO_DRAWS = 5_000


def wilson_ci(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95% Wilson score interval of a proportion: never zero-width at 0/n or n/n, unlike a bootstrap."""
    if n == 0:
        return (math.nan, math.nan)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


class Interval(Record):
    """A mean with its 95% interval, and how the interval was made."""

    mean: float
    ci_low: float
    ci_high: float
    interval: Literal["wilson", "bootstrap", "paired_bootstrap"] | None = None  # None: a file that did not say


def mean_ci(values: Sequence[float], seed: int = 0) -> Interval | None:
    """Mean with a 95% interval: Wilson for 0/1 outcomes (accuracy), the percentile bootstrap otherwise.
    None for no values: nothing was measured (never a 0)."""
    if not values:
        return None
    if all(v in (0.0, 1.0) for v in values):
        (low, high), kind = wilson_ci(int(sum(values)), len(values)), "wilson"
    else:
        (low, high), kind = bootstrap_ci(values, seed=seed), "bootstrap"
    return Interval(mean=sum(values) / len(values), ci_low=low, ci_high=high, interval=kind)  # type: ignore[arg-type]


def paired_difference_ci(a: Sequence[float], b: Sequence[float], seed: int = 0) -> Interval | None:
    """Mean of a − b over paired items (problems) with its 95% paired bootstrap interval; None for no pairs."""
    differences = [x - y for x, y in zip(a, b, strict=True)]
    if not differences:
        return None
    low, high = bootstrap_ci(differences, seed=seed)
    return Interval(mean=sum(differences) / len(differences), ci_low=low, ci_high=high, interval="paired_bootstrap")


def bootstrap_ci(values: Sequence[float], iters: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap interval of the mean, resampling problems."""
    if not values:
        return (math.nan, math.nan)
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(iters))
    return (means[int(0.025 * iters)], means[min(iters - 1, int(0.975 * iters))])


def _vote_correct(subset: Sequence[int], cluster_of: Sequence[int], cluster_correct: Sequence[bool]) -> bool:
    counts: dict[int, list[int]] = {}
    for i in subset:
        if cluster_of[i] >= 0:
            counts.setdefault(cluster_of[i], []).append(i)
    if not counts:
        return False
    winner = min(counts, key=lambda c: (-len(counts[c]), min(counts[c])))
    return cluster_correct[winner]


def maj_at_k(cluster_of: Sequence[int], cluster_correct: Sequence[bool], k: int, seed: int = 0) -> float:
    """Expected majority-vote correctness over k-subsets. `cluster_of[i]` is sample i's cluster (-1: no answer)."""
    n = len(cluster_of)
    if not 1 <= k <= n:
        raise ValueError(f"maj@{k} needs 1 <= k <= n={n}")
    if math.comb(n, k) <= EXACT_SUBSETS:
        subsets = list(itertools.combinations(range(n), k))
    else:
        rng = random.Random(seed)
        subsets = [sorted(rng.sample(range(n), k)) for _ in range(MONTE_CARLO_DRAWS)]
    return sum(_vote_correct(s, cluster_of, cluster_correct) for s in subsets) / len(subsets)


def powers_of_two_upto(n: int) -> list[int]:
    return [2**i for i in range(n.bit_length()) if 2**i <= n]


def vote_clusters(answers: Sequence[str | None], correct: Sequence[bool]) -> tuple[list[int], list[bool]]:
    """Each sample's cluster of equivalent answers (-1 for no answer) and each cluster's correctness: the
    inputs maj@k needs."""
    cluster_of, cluster_correct = [-1] * len(answers), []
    for cid, members in enumerate(cluster_answers(answers)):
        for i in members:
            cluster_of[i] = cid
        cluster_correct.append(correct[members[0]])
    return cluster_of, cluster_correct
