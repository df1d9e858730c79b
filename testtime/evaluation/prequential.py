"""The prequential record of a stream (`summary.json`'s `prequential`): every arrival was answered before
anything was learned from it, so accuracy over arrival order is an honest measure of a method that adapts.

Accuracy (over the labelled arrivals, Wilson interval), its running value after each arrival, and windows of
consecutive arrivals with their own intervals; label-free curves on every arrival, labelled or not: the vote
share of the answer (the selected class's share of the samples) and the answer rate. `state` per window is
the learner's state when the window's last arrival was answered (TTRL: optimiser steps; memory: version).
"""

from __future__ import annotations

from collections.abc import Sequence

from testtime.core.results import ResultRecord, StreamUpdate
from testtime.evaluation.labelfree import confidence
from testtime.evaluation.metrics import mean_ci
from testtime.evaluation.summary import PrequentialSummary, PrequentialWindow, StreamOrder


def window_size(arrivals: int) -> int:
    """Four windows on a short stream, windows of 25 on a long one."""
    return max(1, min(25, -(-arrivals // 4)))


def prequential(
    records: Sequence[ResultRecord], updates: Sequence[StreamUpdate], order: StreamOrder
) -> PrequentialSummary:
    answered = sorted((r for r in records if r.answered_with is not None), key=_arrival)
    graded = [float(bool(r.correct)) for r in answered if r.labelled]
    running: list[float | None] = []
    right = seen = 0
    for record in answered:
        if record.labelled:
            right, seen = right + bool(record.correct), seen + 1
        running.append(right / seen if seen else None)
    size = window_size(len(answered))
    windows = [_window(answered[start : start + size], start) for start in range(0, len(answered), size)]
    kinds = {r.answered_with.kind for r in answered if r.answered_with}
    return PrequentialSummary(
        arrivals=len(answered),
        order=order,
        learner=kinds.pop() if len(kinds) == 1 else "none",
        updates=len(updates),
        final_state=max((u.state for u in updates), default=0),
        accuracy=mean_ci(graded),
        running_accuracy=running,
        window=size,
        windows=windows,
    )


def _arrival(record: ResultRecord) -> int:
    return record.answered_with.arrival if record.answered_with else 0


def _window(records: Sequence[ResultRecord], first: int) -> PrequentialWindow:
    shares = [share for r in records if (share := confidence(r)) is not None]
    last = records[-1].answered_with
    return PrequentialWindow(
        first=first,
        last=first + len(records) - 1,
        accuracy=mean_ci([float(bool(r.correct)) for r in records if r.labelled]),
        vote_share=sum(shares) / len(shares) if shares else None,
        answer_rate=sum(r.prediction is not None for r in records) / len(records),
        state=last.state if last else 0,
    )
