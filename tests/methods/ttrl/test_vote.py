"""TTRL's reward step through the selection core, table-driven. Math (the majority selector): ties, abstains,
all-abstain, equivalence merges, downsampling. Code (the execution selector, in the sandbox): behaviour
classes, abstains, ties, all no-code, public-example failures, and a program that hunts for expected
outputs."""

import asyncio
import hashlib
import random

import pytest

from testtime.core.records import Problem, TestCase
from testtime.core.results import TTRLVote
from testtime.methods.ttrl.vote import VotePolicy, vote
from testtime.sandbox.probe_programs import HUNT_EXPECTED_OUTPUT
from testtime.selectors import SelectionContext, build_selector

MATH = Problem(id="m", domain="math", statement="?")


def math_vote(answers, policy=VotePolicy(), rng=None, tie_policy="earliest") -> TTRLVote:  # noqa: B008
    texts = [f"so \\boxed{{{a}}}" if a is not None else "no answer" for a in answers]
    selector = build_selector("majority", {"tie_policy": tie_policy})
    return asyncio.run(vote(MATH, texts, selector, SelectionContext(), policy, rng))


CASES = [
    # (answers, policy, label, rewards, skipped, tie)
    (["4", "4", "5", "4"], VotePolicy(), "4", [1, 1, 0, 1], None, False),
    # equivalent forms are one class: 1/2, 0.5 and \frac{1}{2} outvote 2
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
def test_math_vote_table(answers, policy, label, rewards, skipped, tie):
    result = math_vote(answers, policy)
    assert result.label == label
    assert result.rewards == tuple(float(r) for r in rewards)
    assert result.skipped == skipped
    assert result.tie is tie


def test_ratio_counts_abstains_in_the_denominator():
    result = math_vote([None, "7", None, "7"])
    assert result.majority_ratio == 0.5
    assert result.no_answer_rate == 0.5
    assert result.margin == 0.5  # no runner-up class
    assert result.classes == 1


def test_label_is_a_raw_representative_with_its_key():
    result = math_vote(["\\frac{1}{2}", "0.5"])
    assert result.label == "\\frac{1}{2}"  # the answer as written, never a canonical form
    assert result.label_key is not None and math_vote(["0.5"]).label_key == result.label_key


def test_random_downsampling_is_seeded_and_rewards_follow_the_kept_samples():
    answers = ["1", "2", "1", "3", "1", "2", "1", "1"]
    a = math_vote(answers, VotePolicy(n_train=4, downsample="random"), random.Random(5))
    b = math_vote(answers, VotePolicy(n_train=4, downsample="random"), random.Random(5))
    assert a.kept == b.kept and len(a.kept) == 4 and list(a.kept) == sorted(a.kept)
    assert a.rewards == tuple(1.0 if answers[i] == "1" else 0.0 for i in a.kept)


def test_random_tie_policy_picks_among_the_tied_only():
    labels = {math_vote(["x", "y", "z", "x", "y"], rng=random.Random(s), tie_policy="random").label for s in range(30)}
    assert labels == {"x", "y"}


@pytest.mark.parametrize("bad", [{"downsample": "last"}, {"min_majority_ratio": 1.5}, {"n_train": 0}])
def test_invalid_policies_are_refused(bad):
    with pytest.raises(ValueError):
        VotePolicy(**bad)


def test_no_samples_is_an_error():
    with pytest.raises(ValueError):
        math_vote([])


# Code: print twice N. Public example 2 -> 4; the inputs the model wrote beforehand: 3 and 7.
CODE = Problem(id="c", domain="code", statement="Print twice N.", public_tests=(TestCase(input="2", output="4"),))
DOUBLE = "print(int(input()) * 2)"
DOUBLE_BUT_2 = "n = int(input())\nprint(5 if n == 2 else 2 * n)"  # agrees with DOUBLE off the public example
SQUARE = "print(int(input()) ** 2)"  # right on the public example, wrong elsewhere
BROKEN = "def f(:"


def code_vote(sandbox, programs, policy=VotePolicy(), problem=CODE, inputs=("3", "7")) -> TTRLVote:  # noqa: B008
    texts = [f"```python\n{p}\n```" if p is not None else "no code" for p in programs]
    context = SelectionContext(sandbox=sandbox, inputs=list(inputs))
    return asyncio.run(vote(problem, texts, build_selector("execution"), context, policy))


CODE_CASES = [
    # (programs, policy, rewards, skipped, tie): the selected class is DOUBLE's; DOUBLE_BUT_2 shares its behaviour
    # on the written inputs but fails the public example, so it earns nothing unless require_public is off
    ([DOUBLE, DOUBLE_BUT_2, SQUARE, None, BROKEN], VotePolicy(), [1, 0, 0, 0, 0], None, False),
    ([DOUBLE, DOUBLE_BUT_2, SQUARE, None, BROKEN], VotePolicy(require_public=False), [1, 1, 0, 0, 0], None, False),
    ([None, None, BROKEN], VotePolicy(), [0, 0, 0], "all_abstain", False),  # no code and no compiling code
    ([SQUARE, DOUBLE], VotePolicy(), [1, 0], None, True),  # one each, both pass the example: the earliest, a tie
    # vote over 5, train the first 2: alone they would tie and SQUARE, the earliest, would win
    ([SQUARE, DOUBLE, DOUBLE, DOUBLE, SQUARE], VotePolicy(n_train=2), [0, 1], None, False),
]


@pytest.mark.parametrize(("programs", "policy", "rewards", "skipped", "tie"), CODE_CASES)
def test_code_vote_table(open_sandbox_or_skip, programs, policy, rewards, skipped, tie):
    result = code_vote(open_sandbox_or_skip, programs, policy)
    assert result.rewards == tuple(float(r) for r in rewards)
    assert result.skipped == skipped and result.tie is tie
    assert result.sandbox_seconds > 0 or skipped


def test_code_vote_reports_behaviours_and_abstains(open_sandbox_or_skip):
    result = code_vote(open_sandbox_or_skip, [DOUBLE, DOUBLE_BUT_2, SQUARE, None, BROKEN])
    assert result.classes == 2  # {DOUBLE, DOUBLE_BUT_2} and {SQUARE}; no code and BROKEN abstain
    assert result.no_answer_rate == pytest.approx(2 / 5)
    assert result.majority_ratio == pytest.approx(2 / 5)
    assert (result.label or "").strip() == DOUBLE and result.label_key is not None


def test_a_program_hunting_for_expected_outputs_earns_nothing(open_sandbox_or_skip):
    """Two copies of a program that searches its frames, the collector and every process's memory for the
    expected output would outvote the honest one if it found it (the reward hack an RL policy would learn)."""
    marker = "EXPECTED-" + hashlib.md5(b"x").hexdigest()
    problem = Problem(
        id="md5",
        domain="code",
        statement="Print EXPECTED- followed by the md5 hex digest of the input line.",
        public_tests=(TestCase(input="x", output=marker),),
    )
    honest = "import hashlib\nprint('EXPECTED-' + hashlib.md5(input().strip().encode()).hexdigest())"
    result = code_vote(open_sandbox_or_skip, [HUNT_EXPECTED_OUTPUT, HUNT_EXPECTED_OUTPUT, honest], problem=problem)
    assert (result.label or "").strip() == honest
    assert result.rewards == (0.0, 0.0, 1.0)
