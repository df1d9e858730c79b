"""What a problem's page says before its candidates: the statement (with its math rendered), what it was
graded against, why each candidate was right or wrong, the candidates grouped by answer class, and the part
of the prompt every candidate shared (shown once, not under each of them).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from testtime.core.records import Problem
from testtime.core.results import ResultRecord
from testtime.core.trace import TraceLine
from testtime.experiments.viewer.mathml import segments

STATEMENT_CHARS = 20_000


def statement(problem: Problem | None, fallback: str | None) -> dict[str, Any] | None:
    """The statement as the method saw it (problems.jsonl), else (a run from before that file) the last user
    message of the chosen candidate's prompt, which holds it inside the benchmark's template."""
    text = problem.statement if problem else fallback
    if text is None:
        return None
    text = text[:STATEMENT_CHARS]
    return {
        "text": text,
        "segments": segments(text) if problem is None or problem.domain == "math" else [{"text": text}],
        "starter_code": problem.starter_code if problem else "",
        "from_prompt": problem is None,
    }


def reference(record: ResultRecord, domain: str) -> str | None:
    """What the problem was graded against, in words (None: unlabelled, or graded before it was recorded)."""
    if record.correct is None:
        return None
    if domain == "code":
        return f"the {record.hidden_tests} hidden tests" if record.hidden_tests else "the hidden tests"
    return record.reference


def why(record: ResultRecord, index: int, answer: str | None, error: str | None, domain: str) -> str | None:
    """One candidate's verdict explained: the failed call, the missing answer, or its answer beside the
    reference (math) or the first hidden test it failed (code). None for an unlabelled problem."""
    if error:
        return f"the call failed: {error[:300]}"
    status = record.sample_status[index] if index < len(record.sample_status) else None
    correct = record.sample_correct[index] if index < len(record.sample_correct) else None
    return _verdict(record, correct, status, answer, domain)


def why_prediction(record: ResultRecord, domain: str) -> str | None:
    """The same for the method's prediction, as graded."""
    return _verdict(record, record.correct, record.status, record.graded_answer, domain)


def _verdict(
    record: ResultRecord, correct: bool | None, status: str | None, answer: str | None, domain: str
) -> str | None:
    if record.correct is None:
        return None
    if domain == "code":
        tests = f"all {record.hidden_tests} hidden tests" if record.hidden_tests else "the hidden tests"
        return {
            "correct": f"passes {tests}",
            "no_code": "no program found in the answer",
            "compile_error": "the program does not compile",
            "error": "every call failed",
            None: None,
        }.get(status, f"fails a hidden test: {status}")
    if answer is None:
        return "every call failed" if status == "error" else "no final answer found (no \\boxed{} or final number)"
    ref = record.reference
    if ref is None:
        return "graded correct" if correct else "graded wrong"
    if not correct:
        return f"{answer} is not equivalent to the reference {ref}"
    return f"{answer} equals the reference {ref}" if answer == ref else f"{answer} is equivalent to the reference {ref}"


def answer_classes(candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The candidates grouped by answer class (the selector's class, or the answer when it has none), the
    largest first; a class is correct if its members are (they share one answer up to equivalence)."""
    groups: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for c in candidates:
        if c["answer"] is None:
            key: Any = ("none",)
        else:
            key = ("class", c["class"]) if c["class"] is not None else ("answer", c["answer"])
        groups[key].append(c)
    classes = [
        {
            "answer": members[0]["answer"],
            "size": len(members),
            "indices": [m["index"] for m in members],
            "correct": next((m["correct"] for m in members if m["correct"] is not None), None),
            "chosen": any(m["chosen"] for m in members),
        }
        for members in groups.values()
    ]
    return sorted(classes, key=lambda c: (c["answer"] is None, -c["size"]))


def shared_prefix(lines: list[TraceLine | None]) -> int:
    """How many leading messages every candidate's prompt has in common (0 when there is one prompt or none)."""
    prompts = [line.messages for line in lines if line is not None]
    if len(prompts) < 2:
        return 0
    shared = 0
    for messages in zip(*prompts, strict=False):
        if any(m != messages[0] for m in messages):
            break
        shared += 1
    return shared
