"""TRT on math: refutations, the wrong-answer list and the summaries solvers are shown (trt.md §3).

A rollout that was shown the incumbent answer, solved from scratch, answered otherwise and wrote an
"[Error Report]" refutes an answer: the one its report names ("the answer cannot be N because ..."), or the
incumbent when it names none. Refutations are evidence against an answer; rollouts that conclude an answer
are its support. The exclusivity selector weighs the two (`selectors/exclusivity.py`). Refuted answers, with
their reasons, are shown to later solvers as a wrong-answer list kept apart from the knowledge list (so no
reflection item pushes them out), newest first, at most two reasons per answer (the released Qwen script's
pruning). The report is read after the reasoning (`</think>`), as in the released code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from testtime.core.answers import equivalent, strip_reasoning
from testtime.core.results import Rejection
from testtime.methods.trt.parsing import error_report

_NAMED = re.compile(r"cannot\s+be\s+\$?(?:\\boxed\{)?\s*([^\s$}]+?)\}?\s*\$?(?=[\s,.;:]|$)", re.IGNORECASE)
_SUMMARY = re.compile(r"\[Summary\]\s*(.*?)(?=\n\s*\[[A-Z][A-Za-z ]+\]|\\boxed|$)", re.DOTALL)
REASONS_PER_ANSWER = 2
SUMMARY_CHARS = 1500


def final_text(text: str) -> str:
    """What follows the reasoning trace (an unclosed trace leaves nothing)."""
    return strip_reasoning(text) or ""


def refutation(text: str, answer: str | None, known: Sequence[str], incumbent: str | None) -> tuple[str, str] | None:
    """(refuted answer, reason) when this rollout refutes an answer it does not itself conclude, else None."""
    report = error_report(final_text(text))
    if report is None or answer is None:
        return None
    named = _NAMED.search(report)
    target = incumbent
    if named is not None:
        target = next((k for k in known if equivalent(k, named.group(1))), named.group(1))
    if target is None or equivalent(target, answer):
        return None
    return target, report


def summary(text: str) -> str:
    """A rollout's "[Summary]" section (after its reasoning), else the end of its final text."""
    final = final_text(text)
    match = _SUMMARY.search(final)
    found = match.group(1).strip() if match else ""
    return (found or final.strip())[-SUMMARY_CHARS:]


def wrong_answer_list(refutations: Sequence[Rejection]) -> str:
    """The refuted answers with their reasons, newest first, at most two reasons per distinct answer."""
    lines: list[str] = []
    shown: list[tuple[str, int]] = []
    for item in reversed(refutations):
        slot = next((i for i, (answer, _) in enumerate(shown) if equivalent(answer, item.answer)), None)
        if slot is None:
            shown.append((item.answer, 1))
        elif shown[slot][1] >= REASONS_PER_ANSWER:
            continue
        else:
            shown[slot] = (shown[slot][0], shown[slot][1] + 1)
        lines.append(f"Wrong answer {item.answer}: {item.reason}")
    return "\n".join(lines)
