"""The run directory: config.json (the manifest), results.jsonl (appended per problem), ledger.jsonl,
cache.sqlite, trace.jsonl, rounds.jsonl (TRT checkpoints), problems.jsonl (the statements as methods saw them),
summary.json. Everything a resume or a replay needs is in here and nowhere else; every reader of these files
goes through this class, which migrates older schemas (`run.migrate`) as it reads.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from testtime.core.errors import UserError, first_error
from testtime.core.jsonl import read_records, repair_tail
from testtime.core.records import Problem
from testtime.core.results import LaterGrade, ResultRecord
from testtime.evaluation.labelfree import Prediction
from testtime.evaluation.summary import RunSummary
from testtime.run import migrate
from testtime.run.manifest import RunManifest

BACKUP = "schema1"  # where an upgraded directory keeps its files as they were


def default_run_path(base: Path, method: str, bench: str, model: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_")[:60]
    bench_slug = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(bench).stem if "/" in bench else bench).strip("_")[:40]
    return base / f"{time.strftime('%Y%m%d-%H%M%S')}-{method}-{bench_slug}-{slug}"


LOCK = ".lock"  # held by the one process writing a run (`lifecycle._lock`)


class RunDir:
    def __init__(self, path: Path) -> None:
        self.path = path

    config_path = property(lambda self: self.path / "config.json")
    results_path = property(lambda self: self.path / "results.jsonl")
    ledger_path = property(lambda self: self.path / "ledger.jsonl")
    cache_path = property(lambda self: self.path / "cache.sqlite")
    summary_path = property(lambda self: self.path / "summary.json")
    predictions_path = property(lambda self: self.path / "predictions.jsonl")
    rounds_path = property(lambda self: self.path / "rounds.jsonl")
    problems_path = property(lambda self: self.path / "problems.jsonl")
    requests_path = property(lambda self: self.path / "requests.jsonl")  # a served run's requests
    graded_path = property(lambda self: self.path / "graded.jsonl")  # a served run's grades, given later

    @classmethod
    def create(cls, path: Path) -> RunDir:
        if path.exists() and not path.is_dir():
            raise UserError(f"--out {path} is a file, not a folder")
        # a lone lock file is a creation killed before its manifest (a Ray worker's node lost): no run yet; a
        # creation still under way holds that lock, and taking it fails saying whose it is
        if path.exists() and any(p.name != LOCK for p in path.iterdir()):
            if (path / "config.json").is_file():
                raise UserError(f"{path} already holds a run; use --resume {path} to continue it, or another --out")
            raise UserError(f"{path} is a folder with other files in it, not a run; choose an empty or new --out")
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"cannot create the run directory {path}: {exc.strerror}") from None
        return cls(path)

    @classmethod
    def open_existing(cls, path: Path) -> RunDir:
        run = cls(path)
        if not run.config_path.is_file():
            raise UserError(f"{path} is not a run directory (no config.json)")
        return run

    # -- the manifest --------------------------------------------------------------------------------------

    def _raw(self, path: Path) -> dict[str, Any]:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UserError(f"cannot read {path}: {exc}") from None
        if not isinstance(raw, dict):
            raise UserError(f"{path} is not a JSON object")
        return raw

    def schema(self) -> int:
        return migrate.schema_of(self._raw(self.config_path))

    def read_manifest(self) -> RunManifest:
        return _validated(RunManifest, migrate.manifest_to_current(self._raw(self.config_path)), self.config_path)

    def write_manifest(self, manifest: RunManifest) -> None:
        _write_atomic(self.config_path, manifest.model_dump_json(indent=2) + "\n")

    def upgrade(self) -> bool:
        """Rewrite a schema-1 directory in the current schema before a resume appends to it (the files as
        they were are kept under `schema1/`). True if it upgraded."""
        if self.schema() >= migrate.CURRENT:
            return False
        backup = self.path / BACKUP
        backup.mkdir(exist_ok=True)
        for path in (self.config_path, self.results_path, self.rounds_path, self.summary_path):
            if path.exists():
                shutil.copy2(path, backup / path.name)
        manifest = self.read_manifest()
        records = self.read_results(later_grades=False)
        if self.rounds_path.exists():
            lines = _json_lines(self.rounds_path)
            _write_atomic(self.rounds_path, "".join(_dumps(migrate.checkpoint_to_current(e)) for e in lines))
        summary = self.read_summary()
        self.rewrite_results(records)
        if summary is not None:
            self.write_summary(summary)
        self.write_manifest(manifest)
        return True

    # -- results -------------------------------------------------------------------------------------------

    def append_result(self, record: ResultRecord) -> None:
        with self.results_path.open("a", encoding="utf-8") as f:
            f.write(_line(record))

    def read_results(self, later_grades: bool = True) -> list[ResultRecord]:
        """Finished problems. A last line torn by a kill -9 is dropped (that problem reruns from the cache). A
        served run's requests graded later (`graded.jsonl`) are read with their grades."""
        if not self.results_path.exists():
            return []
        later = self.read_later_grades() if later_grades else {}
        records = self._read_results()
        return [
            ResultRecord.of(r.ungraded(), later[r.problem_id].grading) if r.problem_id in later else r for r in records
        ]

    def _read_results(self) -> list[ResultRecord]:
        old = self.config_path.is_file() and self.schema() < migrate.CURRENT
        results, lines = [], self.results_path.read_text(encoding="utf-8").split("\n")
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                results.append(ResultRecord.model_validate(migrate.result_to_current(raw) if old else raw))
            except json.JSONDecodeError:
                if number != len(lines) - (lines[-1] == ""):  # the last record may be torn
                    raise UserError(f"{self.results_path}:{number} is not valid JSON") from None
            except ValidationError as exc:
                error = exc.errors()[0]
                where = ".".join(str(part) for part in error["loc"])
                raise UserError(
                    f"{self.results_path}:{number} is not a result record ({where + ': ' if where else ''}"
                    f"{error['msg']})"
                ) from None
        return results

    def read_later_grades(self) -> dict[str, LaterGrade]:
        """Request id → its grade given later (`testtime grade --run`); empty when none was given."""
        if not self.graded_path.exists():
            return {}
        grades = (LaterGrade.model_validate_json(line) for line in read_records(self.graded_path))
        return {g.id: g for g in grades}

    def write_later_grades(self, grades: list[LaterGrade]) -> None:
        _write_atomic(self.graded_path, "".join(g.model_dump_json() + "\n" for g in grades))

    def rewrite_results(self, records: list[ResultRecord]) -> None:
        """Drop a torn tail before appending again, so the file stays one JSON object per line."""
        _write_atomic(self.results_path, "".join(_line(r) for r in records))

    # -- the problems as the method saw them (statements for readers; no label is in a Problem) -----------

    def write_problems(self, problems: list[Problem]) -> None:
        _write_atomic(self.problems_path, "".join(p.model_dump_json() + "\n" for p in problems))

    def append_problem(self, problem: Problem) -> None:
        with self.problems_path.open("a", encoding="utf-8") as f:
            f.write(problem.model_dump_json() + "\n")

    def read_problems(self) -> dict[str, Problem]:
        """Problem id → problem; empty for a run written before problems.jsonl existed. A torn line is skipped."""
        if not self.problems_path.exists():
            return {}
        problems = {}
        for entry in _json_lines(self.problems_path):
            try:
                problem = Problem.model_validate(entry)
            except ValidationError:
                continue
            problems[problem.id] = problem
        return problems

    # -- the summary ---------------------------------------------------------------------------------------

    def read_summary(self) -> RunSummary | None:
        """The summary, or None when the run has not written one yet."""
        if not self.summary_path.exists():
            return None
        raw = migrate.summary_to_current(self._raw(self.summary_path))
        return _validated(RunSummary, raw, self.summary_path)

    def write_summary(self, summary: RunSummary) -> None:
        _write_atomic(self.summary_path, summary.model_dump_json(indent=2) + "\n")

    def write_predictions(self, predictions: list[Prediction]) -> None:
        """predictions.jsonl, in the problems' order: what to hand on (`testtime grade` reads it as it is)."""
        _write_atomic(self.predictions_path, "".join(p.model_dump_json() + "\n" for p in predictions))

    def read_predictions(self) -> list[Prediction]:
        if not self.predictions_path.exists():
            return []
        return [Prediction.model_validate_json(line) for line in read_records(self.predictions_path)]

    def repair_appended(self) -> None:
        """Cut a line torn by a kill -9 off each file a continued served run appends to (results, problems,
        requests; the ledger, trace and checkpoints repair their own)."""
        for path in (self.results_path, self.problems_path, self.requests_path):
            repair_tail(path)

    def read_requests(self) -> list[dict[str, Any]]:
        """A served run's `requests.jsonl` lines (`serve.session.ServedRecord`), each request once, oldest
        first; empty for other runs. A line torn by a kill -9 is skipped."""
        return _json_lines(self.requests_path) if self.requests_path.exists() else []

    def served_methods(self) -> dict[str, str]:
        """A served run's method per request id (each request may name its own); empty for other runs."""
        return request_methods(self.read_requests())


def request_methods(requests: list[dict[str, Any]]) -> dict[str, str]:
    """Request id → the method it was answered with, from `requests.jsonl` lines (`RunDir.read_requests`)."""
    return {
        str(entry["id"]): str(entry["method"]["name"])
        for entry in requests
        if isinstance(entry.get("method"), dict) and "name" in entry["method"] and "id" in entry
    }


def _validated(model: type[BaseModel], raw: dict[str, Any], path: Path) -> Any:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        where, message = first_error(exc)
        raise UserError(f"malformed {path.name} ({path}): {where or 'record'}: {message}") from None


def _json_lines(path: Path) -> list[dict[str, Any]]:
    entries = []
    for line in read_records(path):
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line torn by a kill -9: the round it held is redone from the cache
    return entries


def _dumps(entry: dict[str, Any]) -> str:
    return json.dumps(entry, ensure_ascii=False) + "\n"


def _line(record: ResultRecord) -> str:
    return json.dumps(record.model_dump(mode="json"), ensure_ascii=False) + "\n"


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
