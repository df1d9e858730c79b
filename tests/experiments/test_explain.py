"""The viewer's problem header: statements cut into text and MathML trees (only whitelisted elements, hostile
TeX left as text), each candidate's verdict explained, candidates grouped by class, the shared prompt."""

from __future__ import annotations

from typing import Any

from testtime.core.results import ResultRecord
from testtime.core.trace import TraceLine
from testtime.experiments.viewer.explain import answer_classes, reference, shared_prefix, why
from testtime.experiments.viewer.mathml import TAGS, segments, to_tree


def _tags(tree: Any) -> set[str]:
    if isinstance(tree, str):
        return set()
    tag, _attrs, *kids = tree
    return {tag}.union(*(_tags(k) for k in kids))


def test_inline_and_display_math_become_trees_and_the_rest_stays_text() -> None:
    pieces = segments(r"Find $\frac{1}{2}+x^2$ if \[x \le 3\] holds.")
    assert [p.get("text") for p in pieces if "text" in p] == ["Find ", " if ", " holds."]
    fraction, display = (p for p in pieces if "math" in p)
    assert not fraction["display"] and display["display"] and "mfrac" in _tags(fraction["math"])
    assert "≤" in str(display["math"])


def test_currency_is_not_math() -> None:
    assert segments("it costs $5 and $6 now") == [{"text": "it costs $5 and $6 now"}]


def test_markup_inside_tex_never_becomes_an_element() -> None:
    hostile = r"$\text{<script>alert(1)</script>}$ and $x<img src=x onerror=alert(1)>$"
    for piece in segments(hostile):
        if "math" in piece:
            assert _tags(piece["math"]) <= TAGS and "onerror" not in str(piece["math"][1])
    assert to_tree(r"\text{<script>alert(1)</script>}") is None


def test_tex_the_converter_cannot_read_stays_text() -> None:
    assert to_tree("") is None and to_tree("x" * 5000) is None


def _record(**grading: Any) -> ResultRecord:
    return ResultRecord.model_validate({"problem_id": "p", "prediction": "1", "graded_answer": "1", **grading})


def test_why_each_math_candidate_was_right_or_wrong() -> None:
    record = _record(
        correct=False,
        status="wrong",
        reference="1/2",
        sample_correct=(True, False, False, False),
        sample_status=("correct", "wrong", "no_answer", "error"),
    )
    assert why(record, 0, "0.5", None, "math") == "0.5 is equivalent to the reference 1/2"
    assert why(record, 1, "3", None, "math") == "3 is not equivalent to the reference 1/2"
    assert "no final answer" in (why(record, 2, None, None, "math") or "")
    assert why(record, 3, None, "HTTP 500", "math") == "the call failed: HTTP 500"
    assert reference(record, "math") == "1/2"


def test_why_a_program_failed_names_the_hidden_verdict() -> None:
    record = _record(
        correct=False,
        status="wrong_answer",
        hidden_tests=12,
        sample_correct=(True, False, False),
        sample_status=("correct", "time_limit", "no_code"),
    )
    assert why(record, 0, "print(1)", None, "code") == "passes all 12 hidden tests"
    assert why(record, 1, "while 1: pass", None, "code") == "fails a hidden test: time_limit"
    assert why(record, 2, None, None, "code") == "no program found in the answer"
    assert reference(record, "code") == "the 12 hidden tests"


def test_an_unlabelled_problem_has_no_verdict_to_explain() -> None:
    record = _record(correct=None, status="unlabelled", sample_status=("unlabelled",))
    assert why(record, 0, "7", None, "math") is None and reference(record, "math") is None


def test_candidates_group_by_class_largest_first_no_answer_last() -> None:
    def cand(i: int, answer: str | None, cls: int | None, correct: bool | None = False) -> dict[str, Any]:
        return {"index": i, "answer": answer, "class": cls, "correct": correct, "chosen": i == 1}

    classes = answer_classes(
        [cand(0, None, None), cand(1, "2", 0, True), cand(2, "3", 1), cand(3, "2.0", 0, True), cand(4, None, None)]
    )
    assert [(c["answer"], c["size"], c["indices"]) for c in classes] == [
        ("2", 2, [1, 3]),
        ("3", 1, [2]),
        (None, 2, [0, 4]),
    ]
    assert classes[0]["chosen"] and classes[0]["correct"] and classes[1]["correct"] is False


def _line(call: str, *blobs: str) -> TraceLine:
    return TraceLine(call=call, time=0.0, model="m", outcome="paid", messages=[("user", b) for b in blobs])


def test_the_shared_prompt_is_the_common_leading_messages() -> None:
    assert shared_prefix([_line("a", "s", "q"), _line("b", "s", "q")]) == 2
    assert shared_prefix([_line("a", "s", "q1"), None, _line("b", "s", "q2")]) == 1
    assert shared_prefix([_line("a", "s", "q")]) == 0
