"""Warnings about what a run measured: said at the start where the settings already show it, and kept in the
summary (`warnings`) so that a reader of the numbers sees them too.

- Greedy sampling with more than one sample: every sample is the same, so a vote or a medoid over them is
  one sample paid N times (a client's temperature-0 default, as lm-eval sends, does this to a served majority).
- Nothing measured: every sample cut at max_tokens, or no sample gave an answer of the problem's kind.
"""

from __future__ import annotations

from collections.abc import Sequence

from testtime.core.records import SamplingParams
from testtime.core.results import ResultRecord

ALL_CUT = "every sample was cut at max_tokens before it ended"


def token_flag(method: str) -> str:
    """The flag that raises a sample's token cap: TTRL's rollouts and answers take theirs from its own option
    (it refuses --max-tokens)."""
    return "--method-opt max_response=N" if method == "ttrl" else "--max-tokens"


def greedy_samples(sampling: dict[str, SamplingParams], samples: int | None) -> str | None:
    """The warning for `samples` solver samples drawn at temperature 0, else None."""
    solve = sampling.get("solve")
    if solve is None or solve.temperature != 0 or samples is None or samples < 2:
        return None
    return (
        f"{samples} samples per problem at temperature 0 are {samples} copies of one answer: the selection "
        "among them measures nothing (sample with --temperature > 0, or use --method single)"
    )


def plan_warnings(sampling: dict[str, SamplingParams], samples: int | None) -> list[str]:
    """What a run's plan (its sampling per kind of call, its samples per problem) shows before the first call."""
    greedy = greedy_samples(sampling, samples)
    return [greedy] if greedy else []


def measured_nothing(records: Sequence[ResultRecord], method: str = "") -> list[str]:
    """Warnings for a run whose samples carried nothing to select or grade, naming the likely fix."""
    samples = [c for r in records for c in r.candidates if not c.error]
    if not samples:
        return []
    warnings = []
    if all(c.finish_reason == "length" for c in samples):
        warnings.append(f"{ALL_CUT}: raise {token_flag(method)} (reasoning models need thousands of tokens)")
    if all(c.answer is None for c in samples):
        warnings.append(
            "no sample gave an answer (math looks for a final \\boxed{}, code for a ```python block): check the "
            "prompt template, or grade free-form replies with --bench-opt domain=text"
        )
    return warnings
