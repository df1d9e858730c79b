"""The label-free gate a learning endpoint puts before every swap: an update's trained weights answer the probe
(requests no update trained on, `admission.py`) beside the weights now serving, at the same seeds and sampling,
and replace them only if they are not worse beyond a stated margin on what can be measured without labels:

- format: the share of samples that give an answer at all; refused below the serving weights' by more than
  `ANSWER_RATE_MARGIN`, or by more than sampling noise explains (a pooled two-proportion z of `NOISE_Z` or more:
  about 2% of updates that changed nothing). An update that wrecks the model stops answering: at lr 0.5 on the
  embedded model, 0.19 → 0.00 at the cpu preset's 32 new tokens (z 2.6), which an absolute margin alone let
  through;
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
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence

from testtime.core.records import Problem
from testtime.core.results import GateSignals, GateVerdict, ProblemResult

ANSWER_RATE_MARGIN = 0.25
NOISE_Z = 2.0  # one-sided: a fall this many standard errors deep is beyond the probe's sampling noise


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


def answer_rate_z(serving: GateSignals, trained: GateSignals) -> float:
    """How many standard errors the trained weights' answer rate lies below the serving's (pooled two-proportion
    z; negative: above it; 0 where neither set of samples varies)."""
    if not serving.samples or not trained.samples:
        return 0.0
    pooled = (serving.answer_rate * serving.samples + trained.answer_rate * trained.samples) / (
        serving.samples + trained.samples
    )
    spread = math.sqrt(pooled * (1 - pooled) * (1 / serving.samples + 1 / trained.samples))
    return (serving.answer_rate - trained.answer_rate) / spread if spread else 0.0


def verdict(serving: GateSignals, trained: GateSignals) -> GateVerdict:
    """Accept unless the trained weights are worse beyond the margins (the module's docstring)."""
    why, z = None, answer_rate_z(serving, trained)
    beyond_margin = trained.answer_rate < serving.answer_rate - ANSWER_RATE_MARGIN
    if beyond_margin or z >= NOISE_Z:
        past = f"the margin {ANSWER_RATE_MARGIN}" if beyond_margin else f"sampling noise: z {z:.1f} >= {NOISE_Z}"
        why = (
            f"format: {trained.answer_rate:.2f} of its samples give an answer, against {serving.answer_rate:.2f} "
            f"(a fall past {past})"
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
        serving=serving,
        trained=trained,
        accepted=why is None,
        why=why,
        answer_rate_margin=ANSWER_RATE_MARGIN,
        answer_rate_z=round(z, 3),
        noise_z=NOISE_Z,
    )


async def judge(
    probe: Sequence[Problem], answer: Callable[[Problem, str], Awaitable[ProblemResult]]
) -> tuple[GateSignals, GateSignals]:
    """Both sets of weights on the probe: `answer(problem, which)`, `which` "serving" or "trained"."""
    serving = await asyncio.gather(*(answer(problem, "serving") for problem in probe))  # one batch
    trained = await asyncio.gather(*(answer(problem, "trained") for problem in probe))
    return signals(serving), signals(trained)
