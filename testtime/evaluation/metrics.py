"""Metrics over graded samples: pass@1 (avg@k: the mean accuracy of k samples), unbiased maj@k, intervals.

One interval method per kind of quantity: Wilson for a proportion of 0/1 outcomes (accuracy), the percentile
bootstrap over problems for means of fractional values (pass@1, maj@k), the paired bootstrap for differences.

maj@k is the expected accuracy of a majority vote over a uniformly random k-subset of the n samples,
computed exactly over every subset when there are few and over seeded draws otherwise, vectorised; a tie
between the largest classes earns the correct share of them (the expectation under a random tie-break,
independent of the samples' order); abstains never win.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

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


@dataclass(frozen=True)
class RatioInterval:
    """A ratio of means with its paired bootstrap interval, and the share of resamples that had no ratio (their
    denominator not positive): the interval is conditional on those that had one, and says how many did not."""

    interval: Interval
    undefined: float  # share of resamples left out of the interval


def paired_ratio_ci(
    numerator: Sequence[float], denominator: Sequence[float], seed: int = 0, iters: int = 2000
) -> RatioInterval | None:
    """mean(numerator) / mean(denominator) over paired items (per problem: one reward's gain over the oracle's),
    with a 95% percentile interval from resampling problems, the same problems for both (a paired bootstrap). A
    resample whose denominator is not positive has no ratio: it is left out of the interval and counted in
    `undefined`. None when the full data's denominator is not positive."""
    num, den = np.asarray(numerator, dtype=float), np.asarray(denominator, dtype=float)
    if len(num) == 0 or den.mean() <= 0:
        return None
    picks = np.random.default_rng(seed).integers(0, len(num), (iters, len(num)))
    tops, bottoms = num[picks].mean(axis=1), den[picks].mean(axis=1)
    ratios = np.sort(tops[bottoms > 0] / bottoms[bottoms > 0])
    low, high = ratios[int(0.025 * len(ratios))], ratios[min(len(ratios) - 1, int(0.975 * len(ratios)))]
    interval = Interval(mean=float(num.mean() / den.mean()), ci_low=float(low), ci_high=float(high),
                        interval="paired_bootstrap")  # fmt: skip
    return RatioInterval(interval, undefined=1 - len(ratios) / iters)


def bootstrap_ci(values: Sequence[float], iters: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap interval of the mean, resampling problems (seeded, vectorised)."""
    if not values:
        return (math.nan, math.nan)
    data = np.asarray(values, dtype=float)
    means = np.sort(data[np.random.default_rng(seed).integers(0, len(data), (iters, len(data)))].mean(axis=1))
    return (float(means[int(0.025 * iters)]), float(means[min(iters - 1, int(0.975 * iters))]))


@functools.lru_cache(maxsize=64)
def _subsets(n: int, k: int, seed: int) -> np.ndarray:
    """The k-subsets maj@k averages over, as an index matrix: all of them when there are few, else seeded
    draws. Shared by every problem with n samples (so a whole run's maj@k costs a few array operations)."""
    if math.comb(n, k) <= EXACT_SUBSETS:
        return np.array(list(itertools.combinations(range(n), k)), dtype=np.int64).reshape(-1, k)
    draws = np.random.default_rng(seed).random((MONTE_CARLO_DRAWS, n))
    return np.argsort(draws, axis=1)[:, :k]


def maj_at_k(cluster_of: Sequence[int], cluster_correct: Sequence[bool], k: int, seed: int = 0) -> float:
    """Expected majority-vote correctness over k-subsets. `cluster_of[i]` is sample i's cluster (-1: no answer).
    A tie between the largest classes earns the share of them that is correct (a uniformly random tie-break,
    so the value does not depend on the samples' order); a subset with no answer earns 0."""
    n, m = len(cluster_of), len(cluster_correct)
    if not 1 <= k <= n:
        raise ValueError(f"maj@{k} needs 1 <= k <= n={n}")
    if m == 0:
        return 0.0
    subsets = _subsets(n, k, seed)
    labels = np.asarray(cluster_of, dtype=np.int64)[subsets]
    labels = np.where(labels < 0, m, labels)  # abstains counted apart, never a class
    rows = np.arange(len(subsets), dtype=np.int64)[:, None] * (m + 1)
    counts = np.bincount((labels + rows).ravel(), minlength=len(subsets) * (m + 1)).reshape(-1, m + 1)[:, :m]
    top = counts.max(axis=1, keepdims=True)
    tied = (counts == top) & (top > 0)
    credit = (tied & np.asarray(cluster_correct, dtype=bool)).sum(axis=1) / np.maximum(tied.sum(axis=1), 1)
    return float(credit.mean())


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
