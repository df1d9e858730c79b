"""TRT on math: refutations, the wrong-answer lists and the summaries solvers are shown (trt.md §3).

Paper preset: a rollout that was shown the incumbent answer, solved from scratch, answered otherwise and wrote
an "[Error Report]" refutes an answer: the one its report names ("the answer cannot be N because ..."; a named
target must be a known answer or look like one, so "cannot be negative" names nothing), or the incumbent when
it names none. Refutations are evidence against an answer; rollouts that conclude an answer are its support.
The exclusivity selector weighs the two (`selectors/exclusivity.py`), and solvers are shown what it decided:
the answers it rejected, with their reasons ("wrong"), apart from answers refuted but still supported by more
("disputed"); the incumbent is never listed against itself. At most two reasons per answer, newest first
(the released Qwen script's pruning); `summary_chars` / `reason_chars` cap what is shown (options, recorded).

Released preset (the released Qwen script, `AIME/scripts/vllm_kflow_qwen.py`, exactly where it is
unambiguous): a round's answer is the last `\\boxed{integer}` of its whole generation, else the last integer
anywhere in it (a truncated round still has one); when the answer in a round's "[Answer]" section differs
from the previous round's answer and its text (after `</think>`) has an "[Error Report]" header, even "N/A",
the previous answer is dropped with the report's text as the reason; the list shows every drop, numbered,
newest first, two per answer, "N/A" when empty; summaries and reasons are shown whole, tidied as the script
tidies them (first colon dropped, first letter lower-cased).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from testtime.core.answers import equivalent, strip_reasoning
from testtime.core.results import Rejection
from testtime.methods.trt.parsing import error_report

_NAMED = re.compile(r"cannot\s+be\s+(\S+)", re.IGNORECASE)
_SUMMARY = re.compile(r"\[Summary\]\s*[:\-–—]?\s*(.*?)(?=\n\s*(?:\*\*|#+\s*)?\[[A-Z][A-Za-z ]+\]|\\boxed|$)", re.DOTALL)
_BOXED_INTEGER = re.compile(r"\\boxed\{(-?\d+)\}")
_INTEGER = re.compile(r"-?\d+")
REASONS_PER_ANSWER = 2


def final_text(text: str) -> str:
    """What follows the reasoning trace (an unclosed trace leaves nothing)."""
    return strip_reasoning(text) or ""


def _named(report: str) -> str | None:
    """The answer a report names ("cannot be $\\boxed{12}$,"): its token, unwrapped, if it looks like an answer
    (a digit or a LaTeX command: "cannot be negative" names nothing)."""
    match = _NAMED.search(report)
    token = match.group(1).strip("$.,;:") if match else ""
    if token.startswith("\\boxed{") and token.endswith("}"):
        token = token[len("\\boxed{") : -1]
    token = token.strip("$")
    return token if any(ch.isdigit() for ch in token) or "\\" in token else None


def refutation(text: str, answer: str | None, known: Sequence[str], incumbent: str | None) -> tuple[str, str] | None:
    """(refuted answer, reason) when this rollout refutes an answer it does not itself conclude, else None."""
    report = error_report(final_text(text))
    if report is None or answer is None:
        return None
    named = _named(report)
    target = incumbent if named is None else next((k for k in known if equivalent(k, named)), named)
    if target is None or equivalent(target, answer):
        return None
    return target, report


def summary(text: str, chars: int | None) -> str:
    """A rollout's "[Summary]" section (after its reasoning), else its final text; the last `chars` of it."""
    final = final_text(text)
    match = _SUMMARY.search(final)
    found = (match.group(1).strip() if match else "") or final.strip()
    return found if chars is None else found[-chars:]


def _newest_first(refutations: Sequence[Rejection], keep: Sequence[str] | None) -> list[Rejection]:
    """Refutations of the answers in `keep` (all, if None), newest first, at most two per distinct answer."""
    shown: list[tuple[str, int]] = []
    out = []
    for item in reversed(refutations):
        if keep is not None and not any(equivalent(item.answer, k) for k in keep):
            continue
        slot = next((i for i, (answer, _) in enumerate(shown) if equivalent(answer, item.answer)), None)
        if slot is None:
            shown.append((item.answer, 1))
        elif shown[slot][1] >= REASONS_PER_ANSWER:
            continue
        else:
            shown[slot] = (shown[slot][0], shown[slot][1] + 1)
        out.append(item)
    return out


def evidence_lists(
    refutations: Sequence[Rejection], rejected: Sequence[str], incumbent: str | None, reason_chars: int | None
) -> tuple[str, str]:
    """(wrong, disputed): the answers the selection rejected, and those refuted but still standing (never
    the incumbent), each with its reasons."""

    def line(item: Rejection) -> str:
        reason = item.reason if reason_chars is None else item.reason[:reason_chars]
        return f"Answer {item.answer}: {reason}"

    refuted = {r.answer for r in refutations}
    standing = [
        a
        for a in refuted
        if not any(equivalent(a, r) for r in rejected) and not (incumbent is not None and equivalent(a, incumbent))
    ]
    wrong = dict.fromkeys(line(r) for r in _newest_first(refutations, list(rejected)))  # a reason once
    disputed = dict.fromkeys(line(r) for r in _newest_first(refutations, standing))
    return "\n".join(wrong), "\n".join(disputed)


def _after_reasoning(text: str) -> str:
    return text.split("</think>")[-1]  # as the released loop reads a generation (all of it if unclosed)


def released_answer(text: str) -> str | None:
    """The released loop's answer: the last `\\boxed{integer}` in the whole generation, else its last integer
    anywhere (a truncated round still has one); None only for a text with no digit at all."""
    found = _BOXED_INTEGER.findall(text) or _INTEGER.findall(text)
    return str(int(found[-1])) if found else None


def _released_text(section: str) -> str:
    """As the released loop tidies a section: stripped, its first colon dropped, its first letter lower-cased."""
    section = section.strip()
    colon = section.find(":")
    if colon != -1:
        section = section[:colon] + section[colon + 1 :].lstrip()
    return section[:1].lower() + section[1:]


def released_summary(text: str) -> str:
    """The released loop's reference: what follows the last "[Summary]" up to "[Answer]", whole."""
    return _released_text(_after_reasoning(text).split("[Summary]")[-1].strip().split("[Answer]")[0])


def released_drop(text: str, previous: str | None) -> tuple[str, str] | None:
    """(the previous answer, the report's text) when this round's answer (read from its "[Answer]" section)
    differs from the previous round's and the text has an "[Error Report]" header, even "N/A"."""
    final = _after_reasoning(text)
    if previous is None or "[Error Report]" not in final:
        return None
    answer = released_answer(final.split("[Answer]")[-1])
    if answer is None or equivalent(answer, previous):
        return None
    return previous, _released_text(final.split("[Error Report]")[-1].split("[Summary]")[0]) or "N/A"


def released_list(refutations: Sequence[Rejection]) -> str:
    """Every dropped answer's reason, numbered, newest first, two per answer; "N/A" when there is none."""
    items = _newest_first(refutations, None)
    return "\n".join(f"**Wrong Answer {i}**: {r.reason}" for i, r in enumerate(items, 1)) or "N/A"
