"""Records: a problem cannot carry a label, in a field or in its metadata."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from testtime.core.records import Problem, Reference


def test_problem_has_no_answer_field() -> None:
    with pytest.raises(ValidationError):
        Problem(id="p", domain="math", statement="1+1?", answer="2")  # type: ignore[call-arg]


@pytest.mark.parametrize("key", ["answer", "Solution", "ground_truth", "private_test_cases", "hidden_tests"])
def test_problem_metadata_rejects_label_keys(key: str) -> None:
    with pytest.raises(ValidationError, match="labels"):
        Problem(id="p", domain="math", statement="1+1?", metadata={key: "2"})


def test_records_are_frozen() -> None:
    reference = Reference(problem_id="p", answer="2")
    with pytest.raises(ValidationError):
        reference.answer = "3"  # type: ignore[misc]
