"""The one channel by which labels may reach a method: a grader over the sealed references.

Only the `oracle` reward asks for it (TTRL's "RL with the true labels" upper bound), and only the runner can
open it (`run/build.py`), for a method whose options ask for labels; every record of such a run says
`uses_labels: true`. A method receives a function, never a `Reference`: what it learns is whether an answer
is correct, as a reward would, and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class LabelOracle:
    correct: Callable[[str, str | None], bool]  # (problem id, answer or program) → graded correct
