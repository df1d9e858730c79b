"""Label-free confidence as `predictions.jsonl` reports it: a share of every sample, abstentions counted."""

from __future__ import annotations

from testtime.core.results import RoundCandidate, RoundRecord
from testtime.evaluation.labelfree import support_over_rounds


def _round(number: int, answers: list[str | None]) -> RoundRecord:
    candidates = tuple(RoundCandidate(index=i, answer=a) for i, a in enumerate(answers))
    return RoundRecord(round=number, selected_answer="7", candidates=candidates)


def test_trts_confidence_counts_the_rollouts_that_concluded_nothing() -> None:
    """One answer among four rollouts once read 1.00 in the viewer: the share is of rollouts, not of answers."""
    assert support_over_rounds([_round(1, ["7", None, None, None])], "7") == 0.25
    assert support_over_rounds([_round(1, ["7", "7"]), _round(2, ["7", "5"])], "7") == 0.75
    assert support_over_rounds([_round(1, [None, None])], "7") == 0.0
    assert support_over_rounds([], "7") is None
