"""The early-stopping rules of --adaptive, on vote counts: when each stops, and that `exact` never stops a vote whose
answer the remaining samples could still change."""

from __future__ import annotations

import itertools
import random
import re

import pytest
from pydantic import ValidationError

from testtime.core.adaptive import Adaptive, leader_share_beyond_half


def classes(*sizes: int) -> list[list[int]]:
    """Classes of the given sizes over consecutive sample indices."""
    out, start = [], 0
    for size in sizes:
        out.append(list(range(start, start + size)))
        start += size
    return out


def test_the_posterior_is_the_beta_probability_computed_exactly() -> None:
    """P(Beta(a, b) > 1/2) against a Monte Carlo estimate, and two values by hand."""
    assert leader_share_beyond_half(4, 0) == pytest.approx(31 / 32)  # Beta(5, 1): 1 - 0.5**5
    assert leader_share_beyond_half(1, 1) == pytest.approx(0.5)
    rng = random.Random(0)
    for leader, runner_up in [(5, 2), (7, 3), (3, 3)]:
        draws = [rng.betavariate(leader + 1, runner_up + 1) > 0.5 for _ in range(40_000)]
        assert leader_share_beyond_half(leader, runner_up) == pytest.approx(sum(draws) / len(draws), abs=0.01)


def test_posterior_stops_four_agreeing_samples_and_not_three_of_four() -> None:
    rule = Adaptive(rule="posterior", threshold=0.95)
    assert rule.settled(classes(4), 4, 16) == pytest.approx(31 / 32)
    assert rule.settled(classes(3, 1), 4, 16) is None
    assert rule.settled(classes(6, 1), 7, 16) is not None
    assert rule.settled([], 4, 16) is None  # every sample abstained: nothing is settled


def test_exact_never_stops_a_vote_the_rest_could_change() -> None:
    """Every split of drawn samples into classes: when `exact` stops, no way of drawing the rest changes the
    leader (a new class, the runner-up, or a tie)."""
    rule = Adaptive(rule="exact")
    cap = 8
    for drawn in range(1, cap):
        for sizes in itertools.product(range(drawn + 1), repeat=3):
            if sum(sizes) > drawn:
                continue
            leader, runner_up = sorted(sizes, reverse=True)[:2]
            stopped = rule.settled(classes(*sizes), drawn, cap) is not None
            could_change = runner_up + (cap - drawn) >= leader
            assert stopped == (leader > 0 and not could_change), (sizes, drawn)


def test_window_stops_when_the_last_samples_agree() -> None:
    rule = Adaptive(rule="window", threshold=3)
    assert rule.settled([[0, 2, 3, 4], [1]], 5, 16) == 1.0  # samples 2, 3, 4 agree
    assert rule.settled([[0, 1, 2, 4], [3]], 5, 16) is None
    assert rule.first(16) == 4 and Adaptive(rule="window", threshold=6).first(16) == 6


@pytest.mark.parametrize(
    ("rule", "threshold", "says"),
    [
        ("posterior", 1.5, "confidence between 0.5 and 1"),
        ("posterior", 0.5, "confidence between 0.5 and 1"),
        ("window", 1, "number of samples (2 or more)"),
        ("window", 2.5, "number of samples (2 or more)"),
        ("exact", 0.9, "the exact rule has no threshold"),
    ],
)
def test_a_threshold_the_rule_cannot_take_is_refused(rule: str, threshold: float, says: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(says)):
        Adaptive(rule=rule, threshold=threshold)  # type: ignore[arg-type]


def test_the_default_posterior_stops_three_of_four() -> None:
    """At the default confidence, 0.8, three agreeing samples of four already stop a vote (13/16 = 0.8125)."""
    assert Adaptive().limit == 0.8
    assert Adaptive().settled(classes(3, 1), 4, 16) == pytest.approx(13 / 16)
    assert Adaptive().settled(classes(2, 2), 4, 16) is None


def _walk(rule: Adaptive, answers: list[str | None], cap: int) -> tuple[int, str]:
    """Where `rule` stops a vote whose samples come in as `answers` (the vote's classes: equal texts)."""
    for drawn in rule.schedule(cap):
        seen = answers[:drawn]
        equivalent = [[i for i, a in enumerate(seen) if a == value] for value in dict.fromkeys(seen) if value]
        stop = rule.verdict(rule.counted(seen, equivalent), drawn, cap)
        if stop is not None:
            return stop.drawn, stop.reason
    raise AssertionError("a schedule ends at the cap")


def test_ac_is_adaptive_consistency_as_published_a_check_after_every_sample_by_text() -> None:
    """AC's Beta criterion at 0.95 after every sample: four agreeing samples (31/32) stop it, three (15/16) do not;
    a sample with no answer is a class of its own, and "7" and "7.0" are two texts."""
    ac = Adaptive(rule="ac")
    assert ac.schedule(6) == [1, 2, 3, 4, 5, 6] and ac.limit == 0.95
    assert _walk(ac, ["7"] * 16, 16) == (4, "settled")
    assert _walk(ac, [None, None, None, None, "7"], 5) == (4, "settled")  # AC stops on four abstentions
    assert _walk(Adaptive(), [None, None, None, None, "7"] * 4, 20)[0] > 4  # ours never settles on no answer
    assert _walk(ac, ["7", "7.0", "7", "7.0", "7", "7.0"], 6) == (6, "cap")  # by text: two classes of three


def test_esc_checks_disjoint_windows_where_window_slides() -> None:
    """ESC's windows of 5 are samples 0-4, 5-9, ...: a run of agreement across two windows is not a stop there,
    where the sliding `window` rule (W 5, checked every 2) stops on it."""
    answers = ["1", "2", "1", "1", "1", "1", "1", "3", "1", "1", "1", "1", "1", "1", "1", "1"]
    esc = Adaptive(rule="esc")
    assert esc.schedule(16) == [5, 10, 15, 16] and esc.limit == 5
    assert _walk(esc, answers, 16) == (15, "settled")  # 0-4 and 5-9 each hold another answer; 10-14 agree
    assert _walk(Adaptive(rule="window", threshold=5), answers, 16) == (7, "settled")  # samples 2-6 agree


@pytest.mark.parametrize("rule", ["ac", "esc"])
def test_a_papers_procedure_takes_no_wave_of_ours(rule: str) -> None:
    for field in ({"min_samples": 2}, {"wave": 3}):
        with pytest.raises(ValueError, match="its paper's procedure"):
            Adaptive(rule=rule, **field)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="between 0.5 and 1" if rule == "ac" else "number of samples"):
        Adaptive(rule=rule, threshold=0.3 if rule == "ac" else 1)  # type: ignore[arg-type]
