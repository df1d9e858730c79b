"""`testtime grade`: grade a JSONL of {"id", "prediction"} from any system with this project's grader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testtime.benchmarks.base import Benchmark, read_jsonl
from testtime.benchmarks.scoring import score, summarize
from testtime.core.errors import UserError
from testtime.core.results import ProblemResult, ResultRecord
from testtime.experiments.config import RunConfig, parse_options
from testtime.experiments.run import build_benchmark


def grade_predictions(bench: str, predictions: Path, data_dir: str | None, bench_opt: list[str]) -> dict[str, Any]:
    config = RunConfig(
        method="single",
        bench=bench,
        model="none:",
        data_dir=data_dir,
        bench_options=parse_options(bench_opt, "--bench-opt"),
    )
    benchmark = build_benchmark(config)
    try:
        return _grade(benchmark, bench, predictions)
    finally:
        benchmark.close()


def _grade(benchmark: Benchmark, bench: str, predictions: Path) -> dict[str, Any]:
    problems, references = benchmark.load()
    rows = read_jsonl(predictions, ("id",))
    seen: set[str] = set()
    records = []
    for number, row in enumerate(rows, 1):
        pid = str(row["id"])
        if pid not in references:
            raise UserError(f"{predictions}:{number}: id '{pid}' is not a problem of {bench}")
        if pid in seen:
            raise UserError(f"{predictions}:{number}: id '{pid}' appears twice")
        seen.add(pid)
        prediction = row.get("prediction")
        if prediction is not None and not isinstance(prediction, str):
            prediction = str(prediction)
        result = ProblemResult(problem_id=pid, prediction=prediction)
        records.append(ResultRecord.of(result, score(benchmark, result, references[pid])))
    summary = summarize(records, {})
    if benchmark.domain == "code":
        summary["grader"] = benchmark.describe().get("grader", "lenient")
    return {
        "bench": bench,
        "n": len(records),
        "accuracy": summary["accuracy"]["mean"],
        "summary": summary,
        "missing": [p.id for p in problems if p.id not in seen],
        "per_problem": [
            {"id": r.problem_id, "correct": r.correct, "answer": r.graded_answer, "status": r.status} for r in records
        ],
    }
