"""What the math benchmarks share: row → problem/reference, the boxed-answer prompt, grading.

Grading uses the same `core.answers` relation as voting and TTRL's reward (architecture invariant 2).
"""

from __future__ import annotations

from typing import Any

from testtime.benchmarks.base import (
    Benchmark,
    Grade,
    SealedReferences,
    data_dir,
    load_hub_rows,
    read_jsonl,
    unique_ids,
)
from testtime.core.answers import equivalent, extract_answer
from testtime.core.records import Message, Problem, Reference

INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


def graded_answer(prediction: str | None) -> str | None:
    """A prediction may be a bare answer or a whole completion: a box, if present, is what counts."""
    if prediction is None:
        return None
    boxed = extract_answer(prediction)
    if boxed is not None:
        return boxed
    if "\\boxed" in prediction or "<think>" in prediction:
        return None  # a malformed box or an unclosed trace: no answer, never a guess
    return prediction.strip() or None


class MathBenchmark(Benchmark):
    """A JSONL/hub math set. Subclasses name the hub dataset and how its fields map."""

    domain = "math"
    hub_id: str
    hub_split = "test"
    hub_fields: tuple[str, str, str | None] = ("problem", "answer", None)  # problem, answer, id

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "hub_id": self.hub_id}

    def _rows(self) -> list[dict[str, Any]]:
        folder = data_dir(self.data_dir)
        if folder is not None:
            return read_jsonl(folder / f"{self.name}.jsonl", ("id", "problem", "answer"), id_field="id")
        problem_field, answer_field, id_field = self.hub_fields
        rows = load_hub_rows(self.hub_id, self.hub_split, self.name)
        found = [
            {
                "id": str(r[id_field]) if id_field else f"{self.name}-{i}",
                "problem": r[problem_field],
                "answer": str(r[answer_field]),
            }
            for i, r in enumerate(rows)
        ]
        unique_ids([r["id"] for r in found], self.hub_id)
        return found

    def load(self) -> tuple[list[Problem], SealedReferences]:
        problems, references = [], []
        for row in self._rows():
            metadata = {k: v for k, v in row.items() if k in ("source", "subject", "level", "url")}
            problems.append(Problem(id=str(row["id"]), domain="math", statement=row["problem"], metadata=metadata))
            references.append(Reference(problem_id=str(row["id"]), answer=str(row["answer"])))
        return problems, SealedReferences(references)

    def prompt(self, problem: Problem) -> list[Message]:
        return [Message(role="user", content=f"{problem.statement}\n{INSTRUCTION}")]

    def grade(self, prediction: str | None, reference: Reference) -> Grade:
        answer = graded_answer(prediction)
        if answer is None:
            return Grade(correct=False, answer=None, status="no_answer")
        correct = equivalent(answer, reference.answer)
        return Grade(correct=correct, answer=answer, status="correct" if correct else "wrong")
