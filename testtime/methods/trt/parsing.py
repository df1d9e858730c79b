"""Lenient parsing of TRT's structured model outputs: malformed JSON degrades, it never crashes a run."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from testtime.core.results import Strategy

FALLBACK_STRATEGIES = [
    ("direct computation", "work the problem out carefully step by step"),
    ("work backwards", "start from what the answer must satisfy and check candidates"),
    ("simplify first", "solve a smaller or special case, then generalise"),
    ("independent check", "solve it, then verify the result by a different method"),
]


def _json_value(text: str, opener: str) -> Any:
    """The first JSON value starting with `opener` that parses, fenced or not; None if there is none."""
    closer = "]" if opener == "[" else "}"
    for start in [m.start() for m in re.finditer(re.escape(opener), text)]:
        end = text.rfind(closer)
        while end > start:
            try:
                return json.loads(text[start : end + 1])
            except json.JSONDecodeError:
                end = text.rfind(closer, start, end)
    return None


def _strategies_from(items: Any) -> list[Strategy]:
    out = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("key_technique"):
            out.append(Strategy(key_technique=str(item["key_technique"]), what_to_try=str(item.get("what_to_try", ""))))
    return out


def parse_strategies(text: str, k: int) -> tuple[list[Strategy], bool]:
    """K strategies, and whether the model's own were usable; short lists are topped up with fallbacks."""
    parsed = _strategies_from(_json_value(text, "["))
    ok = len(parsed) >= 1
    fallback = [Strategy(key_technique=a, what_to_try=b) for a, b in FALLBACK_STRATEGIES]
    while len(parsed) < k:
        parsed.append(fallback[len(parsed) % len(fallback)])
    return parsed[:k], ok


class Reflection(BaseModel):
    model_config = ConfigDict(extra="forbid")

    insights: list[str] = []
    deactivate: int | None = None
    strategies: list[Strategy] = []
    parsed: bool = False


def _texts(values: Any) -> list[str]:
    """The non-empty texts (or numbers) of a parsed JSON list, stripped; anything else skipped."""
    values = values if isinstance(values, list) else []
    return [str(v).strip() for v in values if isinstance(v, str | int | float) and str(v).strip()]


def parse_lessons(text: str) -> list[str] | None:
    """memory=shared: the generalised lessons (a JSON list of strings); None when the reply holds no list."""
    value = _json_value(text, "[")
    return _texts(value) if isinstance(value, list) else None


def parse_reflection(text: str) -> Reflection:
    value = _json_value(text, "{")
    if not isinstance(value, dict):
        return Reflection()
    insights = _texts(value.get("insights"))
    deactivate = value.get("deactivate")
    return Reflection(
        insights=insights[:3],
        deactivate=deactivate if isinstance(deactivate, int) else None,
        strategies=_strategies_from(value.get("strategies")),
        parsed=True,
    )


# A section header as models write it: "[Error Report]", "[Error Report]:", "**[Error Report]**", "## [Summary]".
_MARKS = r"(?:\*\*|__|#+[ \t]*)?"
_NEXT_HEADER = rf"(?=\n[ \t]*{_MARKS}\[[A-Z][A-Za-z ]+\]|\n[ \t$]*\\boxed|$)"  # or the final boxed line
_ERROR_REPORT = re.compile(rf"{_MARKS}\[Error Report\](?:\*\*|__)?[ \t]*[:\-–—]?\s*(.*?){_NEXT_HEADER}", re.DOTALL)
_AGREES = re.compile(r"^[\s*_:\-–—\"'`]*(?:N/?A|none)\b", re.IGNORECASE)


def error_report(text: str) -> str | None:
    """The rollout's refutation of the earlier answer, whole; None when it wrote none, or wrote N/A (with or
    without a colon, bold or not). It ends at the next section header, however that header is dressed."""
    match = _ERROR_REPORT.search(text)
    if match is None:
        return None
    report = match.group(1).strip().strip("*_").strip()
    return None if not report or _AGREES.match(report) else report
