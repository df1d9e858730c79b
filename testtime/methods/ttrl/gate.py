"""The label-free gate a learning endpoint puts before every swap: an update's trained weights answer the probe
(requests no update trained on, `admission.py`) beside the weights now serving, at the same seeds and sampling,
and replace them only if they are not worse beyond a stated margin on what can be measured without labels:

- degeneration: the share of samples that loop (the last `TAIL_CHARS` characters compress by more than
  `LOOP_RATIO`, raw ÷ zlib size: Whisper's check for a decoder stuck repeating itself uses 2.4); refused above
  the serving weights' by more than `RATE_MARGIN` or by more than sampling noise explains (a pooled two-proportion
  z of `NOISE_Z` or more: about 2% of updates that changed nothing). Measured on the embedded model: every sample
  of an lr 0.5 update loops (median ratio 3.8, "ardardard hand..."), no sample of 10 ordinary updates' gates does
  (at most 1.8);
- format: the share of samples that give an answer at all; refused below the serving weights' by the same margin
  or noise. An update that wrecks the model stops answering: at lr 0.5 on the embedded model 0.19 → 0.00 at the
  cpu preset's 32 new tokens (z 2.6), inside the margin alone;
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
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence

from testtime.core.records import Problem
from testtime.core.results import GateSignals, GateVerdict, ProblemResult

RATE_MARGIN = 0.25  # a share of samples (answering, looping) may move this far against the trained weights
NOISE_Z = 2.0  # one-sided: a move this many standard errors deep is beyond the probe's sampling noise
LOOP_RATIO = 2.4
TAIL_CHARS = 400  # a loop shows at a sample's end; natural text this short compresses by well under 2


def loops(text: str) -> bool:
    tail = text[-TAIL_CHARS:].encode()
    return bool(tail) and len(tail) / len(zlib.compress(tail, 9)) > LOOP_RATIO


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
        loop_rate=sum(loops(c.text) for c in samples) / len(samples) if samples else 0.0,
    )


def worse_z(better: float, worse: float, samples: tuple[int, int]) -> float:
    """How many standard errors `worse` lies on the wrong side of `better` (two shares of samples: a pooled
    two-proportion z; negative: on the right side; 0 where neither set of samples varies)."""
    n, m = samples
    if not n or not m:
        return 0.0
    pooled = (better * n + worse * m) / (n + m)
    spread = math.sqrt(pooled * (1 - pooled) * (1 / n + 1 / m))
    return (better - worse) / spread if spread else 0.0


def _past(moved: float, z: float) -> str | None:
    """Why a move against the trained weights refuses them (None: within margin and noise)."""
    if moved > RATE_MARGIN:
        return f"the margin {RATE_MARGIN}"
    return f"sampling noise: z {z:.1f} >= {NOISE_Z}" if z >= NOISE_Z else None


def verdict(serving: GateSignals, trained: GateSignals) -> GateVerdict:
    """Accept unless the trained weights are worse beyond the margins (the module's docstring)."""
    why, sizes = None, (serving.samples, trained.samples)
    answer_z = worse_z(serving.answer_rate, trained.answer_rate, sizes)
    answer_past = _past(serving.answer_rate - trained.answer_rate, answer_z)
    loop_z, loop_past = None, None  # figures of older runs have no loop rate
    if serving.loop_rate is not None and trained.loop_rate is not None:
        loop_z = worse_z(1 - serving.loop_rate, 1 - trained.loop_rate, sizes)
        loop_past = _past(trained.loop_rate - serving.loop_rate, loop_z)
    if loop_past is not None:
        why = (
            f"degeneration: {trained.loop_rate:.2f} of its samples loop (compress by over {LOOP_RATIO}), against "
            f"{serving.loop_rate:.2f} (a rise past {loop_past})"
        )
    elif answer_past is not None:
        why = (
            f"format: {trained.answer_rate:.2f} of its samples give an answer, against {serving.answer_rate:.2f} "
            f"(a fall past {answer_past})"
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
        answer_rate_margin=RATE_MARGIN,
        answer_rate_z=round(answer_z, 3),
        loop_rate_z=round(loop_z, 3) if loop_z is not None else None,
        noise_z=NOISE_Z,
    )


async def judge(
    probe: Sequence[Problem], answer: Callable[[Problem, str], Awaitable[ProblemResult]]
) -> tuple[GateSignals, GateSignals]:
    """Both sets of weights on the probe: `answer(problem, which)`, `which` "serving" or "trained"."""
    serving = await asyncio.gather(*(answer(problem, "serving") for problem in probe))  # one batch
    trained = await asyncio.gather(*(answer(problem, "trained") for problem in probe))
    return signals(serving), signals(trained)
