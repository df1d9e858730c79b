"""`--domain auto`: a chat, a question in words or a summary request is text; a sum, an equation, a contest
problem or a request for a box is math; a label decides where there is one. Each side has its near misses."""

from __future__ import annotations

import pytest

from testtime.core.answers.domain import asks_for_math, auto_domain

TEXT = [
    "Write a haiku about autumn rain.",
    "What is the capital of France?",
    "Summarise this paragraph in one sentence: the meeting moved to Tuesday.",
    "Who wrote Pride and Prejudice?",
    "Translate 'good morning' into Spanish.",
    "Tell me about the French Revolution of 1789.",  # a year is not mathematics
    "The 2020-2021 season: who won?",  # nor a range of years
]
MATH = [
    "What is 17 * 23?",
    "Solve for x: 2x + 3 = 11.",
    "Compute the remainder when $2^{100}$ is divided by 7.",
    "How many positive divisors does 360 have?",
    "Let $f(x) = \\frac{1}{x}$. Find $f(2)$.",
    "Give your final answer in \\boxed{}.",
    "If x = 3, what is x^2?",
]


@pytest.mark.parametrize("statement", TEXT)
def test_words_without_mathematics_are_text(statement: str) -> None:
    assert not asks_for_math(statement)
    assert auto_domain([statement]) == "text"


@pytest.mark.parametrize("statement", MATH)
def test_a_computation_an_equation_or_a_box_is_math(statement: str) -> None:
    assert asks_for_math(statement)
    assert auto_domain([statement]) == "math"


def test_labels_decide_before_the_words() -> None:
    assert auto_domain(["Write a haiku."], ["42"]) == "math"  # numeric labels: graded by math's relation
    assert auto_domain(["What is 2 + 2?"], ["four"]) == "text"  # prose labels: compared as text
    assert auto_domain(["Write a haiku."], ["  "]) == "text"  # a blank label is no label


def test_a_file_goes_by_most_of_its_problems_and_an_empty_one_stays_math() -> None:
    assert auto_domain(TEXT[:3] + MATH[:1]) == "text"
    assert auto_domain(TEXT[:1] + MATH[:1]) == "math"  # a tie: math, the answer format that can be graded
    assert auto_domain([]) == "math"
