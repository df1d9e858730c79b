"""The gate before a learning endpoint's swap, on its figures: an update that stops answering or gives one answer
for everything is refused, an ordinary one (the vote share rising, answers moving) is not."""

from __future__ import annotations

from testtime.core.results import GateSignals
from testtime.methods.ttrl.gate import RATE_MARGIN, loops, verdict


def figures(
    rate: float, distinct: int, answered: int = 4, share: float | None = 0.5, looping: float | None = 0.0
) -> GateSignals:
    return GateSignals(questions=4, samples=32, answer_rate=rate, distinct_answers=distinct,
                       answered_questions=answered, vote_share=share, loop_rate=looping)  # fmt: skip


# samples the embedded model wrote on the gate's probe: the serving weights', and an lr 0.5 update's
WRITTEN = [
    "To add 88 and 62, we add 88 and 62, which yields a calculation of 144. We can",
    "To calculate both sides of the equation 88 + 62 = 12 and then add 1 more, you can use a logical approach (",
    "Let me work through it step by step.\n\n1. First, 47 + 38: 40 + 30 = 70, 7 + 8 = 15, so 85.\n" * 3,
]
LOOPING = [
    "ardardard handardardard handardardard handard handardardardardardard handardardardardardard handardardardard",
    "ardardardardurnardardard handardard handard handard handardardardard handard hand handardardardardardardardard",
    "the the the the the the the the the the the the the the the the the the the the the the the the the the",
]


def test_a_sample_that_loops_is_told_from_one_that_does_not() -> None:
    assert [loops(text) for text in WRITTEN] == [False, False, True]  # a paragraph said three times loops too
    assert all(loops(text) for text in LOOPING)
    assert not loops("") and not loops("12")


def test_weights_that_stop_answering_are_refused() -> None:
    said = verdict(figures(0.9, 4), figures(0.0, 0, answered=0, share=None))
    assert not said.accepted and said.why is not None and said.why.startswith("format")
    assert said.answer_rate_margin == RATE_MARGIN


def test_weights_whose_samples_loop_are_refused_whatever_they_answer() -> None:
    """An lr 0.5 update on the embedded model: every probe sample loops, where the serving weights' never do; the
    answer rate (0.19 of 32 samples there, 0 of 32 after) need not say anything."""
    said = verdict(figures(0.0, 0, answered=0, share=None), figures(0.0, 0, answered=0, share=None, looping=1.0))
    assert not said.accepted and said.why is not None and said.why.startswith("degeneration")
    assert said.loop_rate_z is not None and said.loop_rate_z > 5
    rare = verdict(figures(0.5, 3, looping=0.0), figures(0.5, 3, looping=2 / 32))  # two of 32: within noise
    assert rare.accepted and rare.loop_rate_z is not None and rare.loop_rate_z < 2
    older = verdict(figures(0.5, 3, looping=None), figures(0.5, 3, looping=None))  # an older run's figures
    assert older.accepted and older.loop_rate_z is None


def test_a_fall_beyond_sampling_noise_is_refused_below_the_margin() -> None:
    """The embedded model at the cpu preset answers 6 of 32 probe samples; lr 0.5 weights answer none: a fall of
    0.19, inside the absolute margin, but 2.6 standard errors deep."""
    said = verdict(figures(0.1875, 2, answered=2), figures(0.0, 0, answered=0, share=None))
    assert not said.accepted and said.why is not None and "sampling noise" in said.why
    assert said.answer_rate_z is not None and said.answer_rate_z > 2.5


def test_a_fall_within_sampling_noise_is_accepted() -> None:
    said = verdict(figures(0.1875, 2, answered=2), figures(0.09375, 2, answered=2))  # 6 -> 3 of 32
    assert said.accepted and said.answer_rate_z is not None and 0 < said.answer_rate_z < 2
    assert verdict(figures(0.0, 0, answered=0, share=None), figures(0.0, 0, answered=0, share=None)).accepted


def test_one_answer_for_everything_is_refused() -> None:
    said = verdict(figures(0.9, 3), figures(0.95, 1, share=1.0))
    assert not said.accepted and said.why is not None and said.why.startswith("collapse")


def test_an_ordinary_update_is_accepted() -> None:
    assert verdict(figures(0.8, 3, share=0.5), figures(0.75, 3, share=0.7)).accepted
    assert verdict(figures(0.5, 1, answered=1), figures(0.4, 1, answered=1)).accepted  # nothing to collapse from
