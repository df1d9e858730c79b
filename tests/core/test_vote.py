"""The majority vote: equivalence merges, tie policy, abstains, all-abstain."""

from __future__ import annotations

import random

import pytest

from testtime.core.answers import cluster_answers, majority_vote


def test_equivalent_spellings_merge_into_one_cluster() -> None:
    assert cluster_answers(["0.5", "\\frac12", "016", "16", None, "1/2"]) == [[0, 1, 5], [2, 3]]


def test_symbolic_forms_merge() -> None:
    assert cluster_answers(["\\sqrt{8}", "3", "2\\sqrt{2}"]) == [[0, 2], [1]]


def test_largest_cluster_wins_with_ratio_and_margin() -> None:
    vote = majority_vote(["3", "5", "5", None, "05"])
    assert vote.answer == "5"
    assert vote.majority_ratio == pytest.approx(3 / 5)  # abstains count in the denominator
    assert vote.margin == pytest.approx(2 / 5)
    assert not vote.tie


def test_tie_earliest_policy_picks_first_appearing_and_says_tie() -> None:
    vote = majority_vote(["7", "9", "9", "7"])
    assert vote.answer == "7"
    assert vote.tie


def test_tie_random_policy_is_seeded() -> None:
    answers = ["1", "2", "3", "4"]
    picks = {majority_vote(answers, "random", random.Random(seed)).answer for seed in range(40)}
    assert len(picks) > 1
    assert (
        majority_vote(answers, "random", random.Random(3)).answer
        == majority_vote(answers, "random", random.Random(3)).answer
    )


def test_no_answer_never_wins_even_when_most_common() -> None:
    vote = majority_vote([None, None, None, "4"])
    assert vote.answer == "4"
    assert vote.majority_ratio == pytest.approx(0.25)


def test_all_abstain_gives_no_winner() -> None:
    vote = majority_vote([None, None])
    assert vote.winner is None and vote.answer is None and vote.majority_ratio == 0.0


def test_unknown_tie_policy_rejected() -> None:
    with pytest.raises(ValueError, match="tie policy"):
        majority_vote(["1"], "loudest")
