"""The confidence-weighted vote and DeepConf's filter on the majority selector: a confident minority can win a
weighted vote and never a counted one, the filter drops the least confident answers, and a run that cannot give
token statistics is refused before it pays."""

from __future__ import annotations

import asyncio

import pytest

from testtime.core.errors import UserError
from testtime.core.records import Candidate, Problem, TokenStats
from testtime.selectors import SelectionContext, build_selector

PROBLEM = Problem(id="p", domain="math", statement="What is 3 + 4?")


def sample(i: int, answer: str | None, certainty: float | None) -> Candidate:
    stats = None if certainty is None else TokenStats(tokens=5, logprob_mean=-0.1, self_certainty=certainty)
    return Candidate(index=i, text=f"\\boxed{{{answer}}}", answer=answer, token_stats=stats)


# three unsure votes for 8, two sure votes for 7
VOTES = [sample(0, "8", 0.5), sample(1, "8", 0.4), sample(2, "8", 0.6), sample(3, "7", 4.0), sample(4, "7", 3.5)]


def select(**options: object):  # type: ignore[no-untyped-def]
    return asyncio.run(build_selector("majority", options).select(PROBLEM, VOTES, SelectionContext()))


def test_counted_the_majority_wins_weighed_the_confident_minority_does() -> None:
    counted, weighed = select(), select(weight="confidence")
    assert counted.answer == "8" and counted.rule == "majority(tie=earliest)"
    assert weighed.answer == "7" and weighed.rule == "majority(weight=confidence, keep=1)"
    assert weighed.majority_ratio == pytest.approx(7.5 / 9.0)
    assert [s.score for s in weighed.scores] == pytest.approx([1.5, 1.5, 1.5, 7.5, 7.5])


def test_the_filter_keeps_the_most_confident_share() -> None:
    """keep=0.4 of five answered samples: the two most confident vote, the rest abstain."""
    kept = select(keep=0.4)
    assert kept.answer == "7" and kept.cluster_sizes == (2,)
    assert [s.cluster for s in kept.scores] == [None, None, None, 0, 0]


def test_no_statistics_means_no_weight_never_a_made_up_one() -> None:
    unstated = [sample(0, "8", None), sample(1, "7", 2.0)]
    chosen = asyncio.run(
        build_selector("majority", {"weight": "confidence"}).select(PROBLEM, unstated, SelectionContext())
    )
    assert chosen.answer == "7" and [s.cluster for s in chosen.scores] == [None, 0]


def test_a_run_without_logprobs_is_refused_before_it_pays() -> None:
    from testtime.run.build import build_method, check_run_flags, plan_of
    from testtime.run.settings import RunSettings

    settings = RunSettings(
        method="majority", bench="arith", model="fake:", method_options={"selector_options": {"weight": "confidence"}}
    )
    with pytest.raises(UserError, match="weighs each sample by its token confidence: add --logprobs"):
        check_run_flags(settings, plan_of(build_method(settings), settings, "math"))
    with_stats = settings.model_copy(update={"logprobs": 0})
    check_run_flags(with_stats, plan_of(build_method(with_stats), with_stats, "math"))
