"""`testtime report RUN_DIR ...`: runs side by side, each beside its same-budget majority baseline.

Per run: accuracy with CI, calls, tokens, cost, sandbox seconds, training tokens. The baseline is a majority
run of the same benchmark and model among the inputs, evaluated at k = the run's solver rollouts per problem
(unbiased maj@k, so any k ≤ its n). Per problem, for multi-round runs: which round first made the answer
correct, every flip, the strategy of the selected rollout there, and the tokens spent until then.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from statistics import mean
from typing import Any

from testtime.benchmarks.metrics import bootstrap_ci, maj_at_k
from testtime.core.errors import UserError
from testtime.core.ledger import LedgerEntry, read_entries
from testtime.core.results import ResultRecord
from testtime.core.rundir import RunDir


@dataclass
class LoadedRun:
    path: str
    config: dict[str, Any]
    summary: dict[str, Any]
    records: list[ResultRecord]
    ledger: list[LedgerEntry]  # paid calls only

    def __getitem__(self, key: str) -> Any:
        return getattr(self, key)


def _open(path: Path) -> LoadedRun:
    run = RunDir.open_existing(path)
    if not run.summary_path.exists():
        raise UserError(f"{path} has no summary.json yet: finish it with testtime run --resume {path}")
    return LoadedRun(
        path=str(path),
        config=run.read_config(),
        summary=json.loads(run.summary_path.read_text()),
        records=run.read_results(),
        ledger=[e for e in read_entries(run.ledger_path) if not e.cached],
    )


def _rollouts(run: LoadedRun) -> int:
    summary = run["summary"]
    return summary.get("same_budget_majority_n") or run["config"]["run"].get("n") or 1


def _baseline(run: LoadedRun, majorities: list[LoadedRun]) -> dict[str, Any] | None:
    key = (run["config"]["run"]["bench"], run["config"]["run"]["model"])
    for majority in majorities:
        records = majority["records"]
        if (majority["config"]["run"]["bench"], majority["config"]["run"]["model"]) != key or not records:
            continue
        if records[0].cluster_of is None or majority is run:
            continue
        n = min(len(r.candidates) for r in records)
        k = min(_rollouts(run), n)
        per_problem = [maj_at_k(r.cluster_of or (), r.cluster_correct or (), k) for r in records]
        low, high = bootstrap_ci(per_problem)
        return {
            "run": majority["path"],
            "k": k,
            "exact_budget": k == _rollouts(run),
            "accuracy": mean(per_problem),
            "ci_low": low,
            "ci_high": high,
        }
    return None


def _provenance(run: LoadedRun) -> list[dict[str, Any]]:
    out = []
    for record in run["records"]:
        audit = record.round_audit
        if not audit:
            continue
        flips = [
            {"round": t + 1, "to": "correct" if now else "wrong"}
            for t, (before, now) in enumerate(zip([False, *audit.accuracy], audit.accuracy, strict=False))
            if before != now
        ]
        first = next((t + 1 for t, ok in enumerate(audit.accuracy) if ok), None)
        strategy = None
        if first is not None:
            chosen_round = record.rounds[first - 1]
            chosen = chosen_round.selection.index if chosen_round.selection else None
            strategy = next((c.strategy for c in chosen_round.candidates if c.index == chosen), None)
        spent = (
            None
            if first is None
            else sum(
                e.prompt_tokens + e.completion_tokens
                for e in run["ledger"]
                if e.problem_id == record.problem_id and (e.step or 0) <= first
            )
        )
        out.append(
            {
                "problem_id": record.problem_id,
                "correct": record.correct,
                "first_correct_round": first,
                "flips": flips,
                "strategy_at_first_correct": strategy,
                "tokens_to_first_correct": spent,
            }
        )
    return out


def build_report(paths: list[Path]) -> dict[str, Any]:
    if not paths:
        raise UserError("report needs at least one run directory")
    runs = [_open(p) for p in paths]
    majorities = [r for r in runs if r["config"]["run"]["method"] == "majority"]
    rows = []
    for run in runs:
        summary, ledger = run["summary"], run["summary"].get("ledger", {})
        rows.append(
            {
                "run": run["path"],
                "method": run["config"]["run"]["method"],
                "bench": run["config"]["run"]["bench"],
                "model": run["config"]["run"]["model"],
                "method_config": run["config"].get("method", {}),
                "problems": summary["problems"],
                "accuracy": summary["accuracy"],
                "rollouts_per_problem": _rollouts(run),
                "calls": ledger.get("calls", 0),
                "tokens": ledger.get("tokens", 0),
                "cost_usd": ledger.get("cost_usd"),
                "cost_known": ledger.get("cost_known", True),
                "sandbox_seconds": ledger.get("sandbox_seconds", 0.0),
                "train_tokens": ledger.get("train_tokens", 0),
                "complete": summary.get("complete", True),
                "same_budget_majority": None
                if run["config"]["run"]["method"] == "majority"
                else _baseline(run, majorities),
                "provenance": _provenance(run),
            }
        )
    return {"runs": rows}


def plot_report(report: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["runs"]
    labels = [f"{r['method']}\n{Path(r['run']).name[:24]}" for r in rows]
    means = [r["accuracy"]["mean"] for r in rows]
    errors = [
        [r["accuracy"]["mean"] - r["accuracy"]["ci_low"] for r in rows],
        [r["accuracy"]["ci_high"] - r["accuracy"]["mean"] for r in rows],
    ]
    figure, ax = plt.subplots(figsize=(max(5, 1.6 * len(rows)), 4.5))
    ax.bar(range(len(rows)), means, yerr=errors, capsize=4, color="#4c72b0", label="method")
    for i, row in enumerate(rows):
        base = row["same_budget_majority"]
        if base:
            ax.errorbar(
                [i + 0.3],
                [base["accuracy"]],
                yerr=[[base["accuracy"] - base["ci_low"]], [base["ci_high"] - base["accuracy"]]],
                fmt="D",
                color="#dd8452",
                capsize=3,
                label="majority at the same budget" if i == 0 else None,
            )
    ax.set_xticks(range(len(rows)), labels, fontsize=8)
    ax.set_ylabel("accuracy (95% CI)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
