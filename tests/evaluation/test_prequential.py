"""The prequential summary of a stream: accuracy over arrival order, windows, label-free curves."""

from __future__ import annotations

from testtime.core.results import AnsweredWith, ResultRecord, StreamUpdate
from testtime.core.selection import Selection
from testtime.evaluation.prequential import prequential, window_size


def record(arrival: int, correct: bool | None, state: int = 0, share: float = 0.5) -> ResultRecord:
    return ResultRecord(
        problem_id=f"p{arrival}",
        prediction="1" if correct is not None or arrival % 2 else None,
        correct=correct,
        graded_answer="1",
        status="unlabelled" if correct is None else "correct" if correct else "wrong",
        selection=Selection(index=0, answer="1", rule="majority", majority_ratio=share),
        answered_with=AnsweredWith(arrival=arrival, state=state, kind="weights"),
    )


def test_running_and_windowed_accuracy_follow_arrival_order_not_file_order() -> None:
    records = [record(3, True, 4), record(0, False), record(1, None), record(2, True, 4)]
    summary = prequential(records, [StreamUpdate(state=4, arrivals=2, learned_from=("p0", "p1"))], "dataset")
    assert summary.arrivals == 4 and summary.learner == "weights" and summary.final_state == 4
    assert summary.running_accuracy == [0.0, 0.0, 0.5, 2 / 3]  # the unlabelled arrival changes nothing
    assert summary.accuracy is not None and summary.accuracy.mean == 2 / 3 and summary.accuracy.interval == "wilson"
    assert summary.window == 1 and [w.state for w in summary.windows] == [0, 0, 4, 4]
    assert summary.windows[1].accuracy is None  # no label in it: not measured, never 0
    assert summary.windows[1].vote_share == 0.5


def test_an_unlabelled_stream_has_label_free_curves_and_no_accuracy() -> None:
    summary = prequential([record(i, None, share=0.25 * (i % 4 + 1)) for i in range(8)], [], "stdin")
    assert summary.accuracy is None and summary.running_accuracy == [None] * 8
    assert [w.vote_share for w in summary.windows] == [0.5, 1.0, 0.5, 1.0]  # of the answered arrivals (odd ones)
    assert [w.answer_rate for w in summary.windows] == [0.5] * 4


def test_windows_are_four_on_a_short_stream_and_at_most_25_arrivals_on_a_long_one() -> None:
    assert [window_size(n) for n in (1, 4, 8, 32, 100, 1000)] == [1, 1, 2, 8, 25, 25]
