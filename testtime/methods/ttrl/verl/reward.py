"""verl's per-sample reward hook for TTRL: extract only, score 0.

verl 0.8 scores each response as it streams in, before the prompt's group exists, so this function cannot
vote. It reports the extracted answer (`pred`, which verl's validation uses for maj@N) and a placeholder
score; the trainer's vote hook overwrites every score at the group barrier (see `hook.py`). Loaded by verl
from this file's path (`reward.custom_reward_function.path`).
"""

from __future__ import annotations

from typing import Any

from testtime.core.answers import extract_answer


def extract_only(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None, **kwargs: Any
) -> dict[str, Any]:
    return {"score": 0.0, "pred": extract_answer(solution_str) or ""}
