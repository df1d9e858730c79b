"""Folders of runs, as researchers read them: `find_runs` turns run directories and folders that hold runs (an
ablation grid, a `runs/` folder) into the runs inside, for `view`, `report` and `runs`; `run_rows` gives one
row per (run, problem) with the prediction kept as text, the grade, the label-free confidence (and, with
`--logprobs`, the answer's mean token log-prob), the problem's tokens and cost, and whether its run has finished
(an unfinished run's answered problems are rows too); a served run's rows carry each request's own method.
`load_runs` is the same as a pandas DataFrame (`testtime.load_runs`).
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from testtime.core.errors import UserError
from testtime.core.ledger import read_entries
from testtime.evaluation.labelfree import answer_logprob, confidence
from testtime.run.directory import RunDir

COLUMNS = (
    "run", "path", "kind", "method", "uses_labels", "bench", "model", "problem_id", "prediction", "graded_answer",
    "reference", "correct", "status", "confidence", "logprob_mean", "samples", "calls", "tokens", "cost_usd",
    "finished",
)  # fmt: skip


def find_runs(paths: Iterable[Path]) -> list[Path]:
    """Each path that is a run, and every run inside each path that is a folder of runs (at any depth; what
    lies inside a run — its replays, its `schema1/` backup — belongs to it and is not listed)."""
    found: list[Path] = []
    for path in paths:
        if (path / "config.json").is_file():
            found.append(path)
            continue
        if not path.is_dir():
            raise UserError(f"{path} is neither a run directory nor a folder of runs")
        inside = []
        for folder, subfolders, files in os.walk(path):
            if "config.json" in files:
                inside.append(Path(folder))
                subfolders.clear()  # a run's own folders are not runs of the collection
            subfolders.sort()
        if not inside:
            raise UserError(f"{path} holds no run directory (no config.json below it)")
        found.extend(sorted(inside))
    if not found:
        raise UserError("name at least one run directory or folder of runs")
    return found


def run_rows(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """One row per (run, problem), in `COLUMNS`' order. `run` is the run's folder name, made unique by its
    parents when two runs share one; `null` where a value was not measured (a cost with unknown prices)."""
    return listing(paths)[0]


def listing(paths: Iterable[Path]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`run_rows`, and the runs that answered no problem yet (stopped at once, killed while loading): they have
    no row, so `testtime runs` lists them apart rather than leave them out. Each run is read once."""
    rows, unanswered = [], []
    for header, directory in _runs(paths):
        records = directory.read_results()
        if not records:
            unanswered.append(header)
            continue
        methods = directory.served_methods()  # a served run: each request's own method
        usage: dict[str, list[Any]] = defaultdict(list)
        if directory.ledger_path.exists():
            for entry in read_entries(directory.ledger_path):
                if entry.kind == "model_call" and not entry.cached:
                    usage[entry.problem_id].append(entry)
        for record in records:
            entries = usage.get(record.problem_id, [])
            costs = [e.cost_usd for e in entries]
            rows.append(
                {
                    **header,
                    "method": methods.get(record.problem_id, header["method"]),
                    "problem_id": record.problem_id,
                    "prediction": record.graded_answer if record.graded_answer is not None else record.prediction,
                    "graded_answer": record.graded_answer,
                    "reference": record.reference,
                    "correct": record.correct,
                    "status": record.status,
                    "confidence": confidence(record),
                    "logprob_mean": answer_logprob(record),  # runs with --logprobs; else null
                    "samples": len(record.candidates),
                    "calls": len(entries),
                    "tokens": sum(e.prompt_tokens + e.completion_tokens for e in entries),
                    "cost_usd": None if any(c is None for c in costs) else sum(c for c in costs if c is not None),
                }
            )
    return [{column: row[column] for column in COLUMNS} for row in rows], unanswered


def _runs(paths: Iterable[Path]) -> list[tuple[dict[str, Any], RunDir]]:
    """Each run with the columns every one of its rows shares."""
    runs = find_runs(paths)
    found = []
    for path, name in zip(runs, _names(runs), strict=True):
        directory = RunDir.open_existing(path)
        manifest = directory.read_manifest()
        header = {
            "run": name,
            "path": str(path),
            "kind": manifest.kind,
            "method": manifest.run.method,
            "uses_labels": bool(manifest.effective and manifest.effective.uses_labels),
            "bench": manifest.run.bench,
            "model": manifest.run.model,
            "finished": directory.summary_path.exists(),  # no summary yet: killed, stopped, or still running
        }
        found.append((header, directory))
    return found


def load_runs(*paths: str | os.PathLike[str]) -> Any:
    """A pandas DataFrame with one row per (run, problem) of the runs in `paths` (runs, or folders of runs).
    Predictions stay text ("007" is not 7), `correct` is a nullable boolean (unlabelled: <NA>), unknown costs
    are NaN. Pivot for problems × runs: `df.pivot(index="problem_id", columns="run", values="correct")`."""
    try:
        import pandas as pd
    except ImportError:
        raise UserError("load_runs needs pandas: pip install pandas") from None
    for path in paths:
        if not isinstance(path, (str, os.PathLike)) or isinstance(path, bytes) or path == "":
            raise UserError(f"load_runs takes run directories or folders of runs (str or Path), not {path!r:.60}")
    rows = run_rows(Path(p) for p in paths)
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    for column in ("prediction", "graded_answer", "reference", "problem_id", "run"):
        frame[column] = frame[column].astype("string")
    frame["correct"] = frame["correct"].astype("boolean")
    for column in ("confidence", "logprob_mean"):
        frame[column] = frame[column].astype("float64")
    frame["cost_usd"] = frame["cost_usd"].astype("float64")
    return frame


def _names(runs: list[Path]) -> list[str]:
    """Each run's folder name, with its parent's prefixed where two runs share a name."""
    names = [p.name for p in runs]
    clashes = {n for n in names if names.count(n) > 1}
    return [f"{p.parent.name}/{p.name}" if p.name in clashes else p.name for p in runs]
