"""One answer relation for the whole project: extraction, canonical keys and equivalence.

The majority vote, TTRL's reward, TRT's selection and final grading all call these three functions
(architecture invariant 2). `None` means "no answer": it is its own class and equals nothing.
"""

from testtime.core.answers.equivalence import answer_key, equivalent, is_exact_number
from testtime.core.answers.extract import extract_answer, last_boxed, strip_reasoning
from testtime.core.answers.vote import TIE_POLICIES, Vote, cluster_answers, majority_vote

__all__ = [
    "TIE_POLICIES",
    "Vote",
    "answer_key",
    "cluster_answers",
    "equivalent",
    "extract_answer",
    "is_exact_number",
    "last_boxed",
    "majority_vote",
    "strip_reasoning",
]
