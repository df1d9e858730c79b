"""The label-free gate a learning endpoint puts before every swap: an update's trained weights answer the probe
(requests no update trained on, `admission.py`) beside the weights now serving, at the same seeds and sampling,
and replace them only if they are not worse beyond a stated margin on what can be measured without labels:

- format: the share of samples that give an answer at all; refused below the serving weights' by more than
  `ANSWER_RATE_MARGIN` (an update that wrecks the model stops answering: measured at lr 0.5, 0.9 → 0.0);
- collapse: the distinct answers the votes give across different questions; refused when every question with an
  answer gets the same one where the serving weights gave two or more, or when the distinct answers fall to half
  or less (TTRL's known failure: one confident answer for everything);
- the vote share (the mean share of a vote's winning class) is recorded beside them, not gated on: TTRL raises it
  by design, and on its own a rise says nothing of correctness.

What it cannot catch: weights that answer every probe question in the right format with different, wrong
answers; a change the probe's few questions do not exercise; anything a label would show and agreement does not.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence

from testtime.core.records import Problem
from testtime.core.results import GateSignals, GateVerdict, ProblemResult

ANSWER_RATE_MARGIN = 0.25


def signals(results: Sequence[ProblemResult]) -> GateSignals:
    samples = [c for r in results for c in r.candidates]
    winners = [r.prediction for r in results if r.prediction is not None]
    shares = [r.selection.majority_ratio for r in results if r.selection is not None and r.prediction is not None]
    return GateSignals(
        questions=len(results),
        samples=len(samples),
        answer_rate=sum(c.answer is not None for c in samples) / len(samples) if samples else 0.0,
        distinct_answers=len(Counter(winners)),
        answered_questions=len(winners),
        vote_share=sum(shares) / len(shares) if shares else None,
    )


def verdict(serving: GateSignals, trained: GateSignals) -> GateVerdict:
    """Accept unless the trained weights are worse beyond the margins (the module's docstring)."""
    why = None
    if trained.answer_rate < serving.answer_rate - ANSWER_RATE_MARGIN:
        why = (
            f"format: {trained.answer_rate:.2f} of its samples give an answer, against {serving.answer_rate:.2f} "
            f"(margin {ANSWER_RATE_MARGIN})"
        )
    elif serving.distinct_answers >= 2 and trained.answered_questions >= 2 and trained.distinct_answers == 1:
        why = (
            f"collapse: one answer for all {trained.answered_questions} questions, where the serving weights give "
            f"{serving.distinct_answers}"
        )
    elif serving.distinct_answers >= 4 and trained.distinct_answers * 2 <= serving.distinct_answers:
        why = (
            f"collapse: {trained.distinct_answers} distinct answers across the probe, against "
            f"{serving.distinct_answers}"
        )
    return GateVerdict(
        serving=serving, trained=trained, accepted=why is None, why=why, answer_rate_margin=ANSWER_RATE_MARGIN
    )


async def judge(
    probe: Sequence[Problem], answer: Callable[[Problem, str], Awaitable[ProblemResult]]
) -> tuple[GateSignals, GateSignals]:
    """Both sets of weights on the probe: `answer(problem, which)`, `which` "serving" or "trained"."""
    serving = await asyncio.gather(*(answer(problem, "serving") for problem in probe))  # one batch
    trained = await asyncio.gather(*(answer(problem, "trained") for problem in probe))
    return signals(serving), signals(trained)
