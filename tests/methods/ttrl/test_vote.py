"""The TTRL vote step, table-driven: ties, abstains, all-abstain, equivalence merges, downsampling."""

import random

import pytest

from testtime.methods.ttrl.vote import VotePolicy, vote_step

CASES = [
    # (answers, policy, label, rewards, skipped, tie)
    (["4", "4", "5", "4"], VotePolicy(), "4", [1, 1, 0, 1], None, False),
    # equivalent forms are one cluster: 1/2, 0.5 and \frac{1}{2} outvote 2
    (["0.5", "2", "\\frac{1}{2}", "2", "1/2"], VotePolicy(), "0.5", [1, 0, 1, 0, 1], None, False),
    # abstains never vote, get reward 0, and stay in the ratio's denominator
    ([None, "7", None, "7"], VotePolicy(), "7", [0, 1, 0, 1], None, False),
    # all abstain: no label, nothing rewarded, the prompt is skipped
    ([None, None, None], VotePolicy(), None, [0, 0, 0], "all_abstain", False),
    # a tie goes to the answer seen first (TTRL's Counter.most_common behaviour), flagged
    (["b", "a", "a", "b"], VotePolicy(), "b", [1, 0, 0, 1], None, True),
    # below the minimum majority ratio: skipped, all rewards 0
    (["1", "2", "3", "1"], VotePolicy(min_majority_ratio=0.75), "1", [0, 0, 0, 0], "below_min_ratio", False),
    # vote over 6, train on the first 3: rewards only for the kept samples, label from all 6
    (["9", "8", "8", "9", "9", "9"], VotePolicy(n_train=3), "9", [1, 0, 0], None, False),
]


@pytest.mark.parametrize(("answers", "policy", "label", "rewards", "skipped", "tie"), CASES)
def test_vote_step_table(answers, policy, label, rewards, skipped, tie):
    vote = vote_step(answers, policy)
    assert vote.label == label
    assert vote.rewards == [float(r) for r in rewards]
    assert vote.skipped == skipped
    assert vote.tie is tie


def test_ratio_counts_abstains_in_the_denominator():
    vote = vote_step([None, "7", None, "7"], VotePolicy())
    assert vote.majority_ratio == 0.5
    assert vote.no_answer_rate == 0.5
    assert vote.margin == 0.5  # no runner-up cluster


def test_label_is_a_raw_representative_with_its_key():
    vote = vote_step(["\\frac{1}{2}", "0.5"], VotePolicy())
    assert vote.label == "\\frac{1}{2}"  # the answer as written, never a canonical form
    assert vote.label_key is not None
    assert vote_step(["0.5"], VotePolicy()).label_key == vote.label_key


def test_random_downsampling_is_seeded_and_rewards_follow_the_kept_samples():
    answers = ["1", "2", "1", "3", "1", "2", "1", "1"]
    a = vote_step(answers, VotePolicy(n_train=4, downsample="random"), random.Random(5))
    b = vote_step(answers, VotePolicy(n_train=4, downsample="random"), random.Random(5))
    assert a.kept == b.kept and len(a.kept) == 4 and a.kept == sorted(a.kept)
    assert a.rewards == [1.0 if answers[i] == "1" else 0.0 for i in a.kept]


def test_random_tie_policy_picks_among_the_tied_only():
    labels = {
        vote_step(["x", "y", "z", "x", "y"], VotePolicy(tie_policy="random"), random.Random(s)).label for s in range(30)
    }
    assert labels == {"x", "y"}


@pytest.mark.parametrize(
    "bad",
    [
        {"downsample": "last"},
        {"tie_policy": "latest"},
        {"min_majority_ratio": 1.5},
        {"n_train": 0},
    ],
)
def test_invalid_policies_are_refused(bad):
    with pytest.raises(ValueError):
        VotePolicy(**bad)


def test_no_samples_is_an_error():
    with pytest.raises(ValueError):
        vote_step([], VotePolicy())
