"""The run directory: config.json, results.jsonl (appended per problem), ledger.jsonl, cache.sqlite,
summary.json. Everything a resume or a replay needs is in here and nowhere else.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from testtime.core.errors import UserError
from testtime.core.results import ResultRecord


def default_run_path(base: Path, method: str, bench: str, model: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_")[:60]
    return base / f"{time.strftime('%Y%m%d-%H%M%S')}-{method}-{bench}-{slug}"


class RunDir:
    def __init__(self, path: Path) -> None:
        self.path = path

    config_path = property(lambda self: self.path / "config.json")
    results_path = property(lambda self: self.path / "results.jsonl")
    ledger_path = property(lambda self: self.path / "ledger.jsonl")
    cache_path = property(lambda self: self.path / "cache.sqlite")
    summary_path = property(lambda self: self.path / "summary.json")

    @classmethod
    def create(cls, path: Path) -> RunDir:
        if path.exists() and any(path.iterdir()):
            raise UserError(f"{path} already holds a run; use --resume {path} to continue it, or another --out")
        path.mkdir(parents=True, exist_ok=True)
        return cls(path)

    @classmethod
    def open_existing(cls, path: Path) -> RunDir:
        run = cls(path)
        if not run.config_path.is_file():
            raise UserError(f"{path} is not a run directory (no config.json)")
        return run

    def write_config(self, config: dict[str, Any]) -> None:
        self.config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")

    def read_config(self) -> dict[str, Any]:
        try:
            config = json.loads(self.config_path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise UserError(f"cannot read {self.config_path}: {exc}") from None
        if not isinstance(config, dict):
            raise UserError(f"{self.config_path} is not a JSON object")
        return config

    def append_result(self, record: ResultRecord) -> None:
        with self.results_path.open("a", encoding="utf-8") as f:
            f.write(_line(record))

    def read_results(self) -> list[ResultRecord]:
        """Finished problems. A last line torn by a kill -9 is dropped (that problem reruns from the cache)."""
        if not self.results_path.exists():
            return []
        results, lines = [], self.results_path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, 1):
            try:
                results.append(ResultRecord.model_validate(json.loads(line)))
            except json.JSONDecodeError:
                if number != len(lines):
                    raise UserError(f"{self.results_path}:{number} is not valid JSON") from None
            except ValidationError as exc:
                raise UserError(
                    f"{self.results_path}:{number} is not a result record ({exc.errors()[0]['msg']})"
                ) from None
        return results

    def rewrite_results(self, records: list[ResultRecord]) -> None:
        """Drop a torn tail before appending again, so the file stays one JSON object per line."""
        tmp = self.results_path.with_suffix(".tmp")
        tmp.write_text("".join(_line(r) for r in records), encoding="utf-8")
        tmp.replace(self.results_path)

    def write_summary(self, summary: dict[str, Any]) -> None:
        self.summary_path.write_text(json.dumps(summary, indent=2) + "\n")


def _line(record: ResultRecord) -> str:
    return json.dumps(record.model_dump(mode="json"), ensure_ascii=False) + "\n"
