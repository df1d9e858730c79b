"""`testtime grade`: grade a JSONL of {"id", "prediction"} from any system with this project's grader, or (`--run`)
a served run's requests once their labels are known: each request is matched to the labelled problem it asked (by
its id, else by the text of its question, whitespace aside), graded by the benchmark's own grader into the run's
`graded.jsonl`, and the run's summary written again: its accuracy, and a learning server's prequential accuracy
over the request sequence. `results.jsonl` keeps each request as it was answered, unlabelled."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from testtime.benchmarks.base import Benchmark
from testtime.benchmarks.rows import read_jsonl
from testtime.core.errors import UserError
from testtime.core.ledger import LedgerTotals, read_entries
from testtime.core.records import Problem, Reference
from testtime.core.results import LaterGrade, ProblemResult, ResultRecord
from testtime.evaluation.scoring import score, summarize
from testtime.run.build import build_benchmark
from testtime.run.directory import RunDir
from testtime.run.lifecycle import hold_lock
from testtime.run.outcome import summarize_served
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


def grade_served(run: Path, bench: str, data_dir: str | None, bench_options: dict[str, Any]) -> dict[str, Any]:
    """Grade a served run's requests against a benchmark's (or a file's) labels; the grades are kept in the run
    (`graded.jsonl`, earlier grades of other requests kept) and its summary is written again."""
    directory = RunDir.open_existing(run)
    manifest = directory.read_manifest()
    if manifest.kind != "served":
        raise UserError(
            f"{run} is a {manifest.kind} run: its problems were graded as they were answered; --run grades a served "
            "run's requests (testtime serve), --predictions a file of answers"
        )
    settings = RunSettings(method="single", bench=bench, model="none:", data_dir=data_dir, bench_options=bench_options)
    lock = hold_lock(directory)  # a server still writing this run is told to stop first
    benchmark = build_benchmark(settings)
    try:
        problems, references = benchmark.load()
        labelled = _by_question(problems, references)
        asked = directory.read_problems()
        grades = directory.read_later_grades()
        graded: list[LaterGrade] = []
        for record in directory.read_results(later_grades=False):
            question = asked.get(record.problem_id)
            pid = record.problem_id if record.problem_id in references else None
            pid = pid or (labelled.get(_words(question.statement)) if question else None)
            if pid is None:
                continue
            grading = score(benchmark, record.ungraded(), references[pid])
            grades[record.problem_id] = LaterGrade(id=record.problem_id, problem=pid, bench=bench, grading=grading)
            graded.append(grades[record.problem_id])
        if not graded:
            raise UserError(
                f"no request of {run} asked a question of {bench} (matched by id, or by the question's words); "
                "check the benchmark and its --bench-opt"
            )
        directory.write_later_grades(list(grades.values()))
        before = directory.read_summary()
        totals = LedgerTotals.of(read_entries(directory.ledger_path))
        n = manifest.effective.n if manifest.effective else None
        summary = summarize_served(directory, manifest.run, n, totals, before.wall_s if before else None)
    finally:
        benchmark.close()
        lock.close()
    answered = len(asked)
    return {
        "bench": bench,
        "run": str(run),
        "n": len(graded),
        "accuracy": summary.accuracy.mean if summary.accuracy else None,
        "summary": summary.model_dump(mode="json"),
        "unmatched_requests": answered - len(graded),
        "per_problem": [
            {"id": g.id, "problem": g.problem, "correct": g.grading.correct, "answer": g.grading.graded_answer}
            for g in graded
        ],
    }


def served_run_of(predictions: Path) -> Path | None:
    """The served run whose `predictions.jsonl` this is, else None."""
    folder = predictions.parent
    if predictions.name != "predictions.jsonl" or not (folder / "config.json").is_file():
        return None
    return folder if RunDir.open_existing(folder).read_manifest().kind == "served" else None


def _words(text: str) -> str:
    return " ".join(text.split())


def _by_question(problems: list[Problem], references: Mapping[str, Reference]) -> dict[str, str]:
    """A question's words → its problem id; a question asked twice with different labels matches neither."""
    found: dict[str, str] = {}
    clashes: set[str] = set()
    for problem in problems:
        key = _words(problem.statement)
        if key in found and references[found[key]].answer != references[problem.id].answer:
            clashes.add(key)
        found.setdefault(key, problem.id)
    return {k: v for k, v in found.items() if k not in clashes}
