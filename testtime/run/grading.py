"""`testtime grade`: grade a JSONL of {"id", "prediction"} from any system with this project's grader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testtime.benchmarks.base import Benchmark
from testtime.benchmarks.rows import read_jsonl
from testtime.core.errors import UserError
from testtime.core.ledger import LedgerTotals
from testtime.core.results import ProblemResult, ResultRecord
from testtime.evaluation.scoring import score, summarize
from testtime.run.build import build_benchmark
from testtime.run.settings import RunSettings


def grade_predictions(
    bench: str, predictions: Path, data_dir: str | None, bench_options: dict[str, Any]
) -> dict[str, Any]:
    settings = RunSettings(method="single", bench=bench, model="none:", data_dir=data_dir, bench_options=bench_options)
    benchmark = build_benchmark(settings)
    try:
        return _grade(benchmark, bench, predictions)
    finally:
        benchmark.close()


def _grade(benchmark: Benchmark, bench: str, predictions: Path) -> dict[str, Any]:
    problems, references = benchmark.load()
    rows = read_jsonl(predictions, ("id",))
    if not rows:
        raise UserError(f'{predictions}: no predictions in it (one JSON line each: {{"id", "prediction"}})')
    seen: set[str] = set()
    records = []
    for number, row in enumerate(rows, 1):
        pid = str(row["id"])
        if pid not in references:
            raise UserError(f"{predictions}:{number}: id '{pid}' is not a problem of {bench}")
        if pid in seen:
            raise UserError(f"{predictions}:{number}: id '{pid}' appears twice")
        seen.add(pid)
        if "prediction" not in row:  # a file of another shape (`answer`, `output`) would grade as all wrong
            keys = ", ".join(sorted(map(str, row))[:8])
            raise UserError(
                f'{predictions}:{number}: no "prediction" field (it has {keys}); each line is '
                '{"id": ..., "prediction": ...} (null: no answer)'
            )
        prediction = row["prediction"]
        if isinstance(prediction, (dict, list)):
            kind = type(prediction).__name__
            raise UserError(f"{predictions}:{number}: the prediction must be text or a number, not a JSON {kind}")
        if prediction is not None and not isinstance(prediction, str):
            prediction = str(prediction)
        result = ProblemResult(problem_id=pid, prediction=prediction)
        records.append(ResultRecord.of(result, score(benchmark, result, references[pid])))
    grader = benchmark.describe().get("grader", "lenient") if benchmark.domain == "code" else None
    summary = summarize(records, LedgerTotals(), bench=bench, grader=grader)
    return {
        "bench": bench,
        "n": len(records),
        "accuracy": summary.accuracy.mean if summary.accuracy else None,
        "summary": summary.model_dump(mode="json"),
        "missing": [p.id for p in problems if p.id not in seen],
        "per_problem": [
            {"id": r.problem_id, "correct": r.correct, "answer": r.graded_answer, "status": r.status} for r in records
        ],
    }
