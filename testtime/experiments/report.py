"""`testtime report RUN_DIR ...`: runs side by side, each beside two majority baselines, named for what they
match: the same solver rollouts (k = T·K for TRT, N·T for RSA), and the same tokens (k = the samples the
method's tokens per problem buy, its longer prompts and extra calls included). TRT at k = T·K spends more
than majority at k, so only the tokens baseline can claim the same budget; `exact_budget` is true only when
the baseline's tokens are within 10% of the method's and k needed no cap.

Per run: accuracy with its 95% Wilson interval, calls, tokens, cost, sandbox seconds, training tokens. The
baseline is a majority run among the inputs whose accuracy-relevant settings are the run's (benchmark and its
options, the problems, model, and the solvers' temperature, top-p and max tokens as they ran); a majority run
that differs is never used, and the report says what differed. Each is unbiased maj@k (any k ≤ its n), with
the paired bootstrap interval of the per-problem difference. Per problem, for
multi-round runs: which round first made the answer correct, every flip, the strategy of the selected
rollout there, and the tokens spent until then.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from testtime.core.errors import UserError
from testtime.core.results import ResultRecord
from testtime.evaluation.metrics import Interval, maj_at_k, mean_ci, paired_difference_ci
from testtime.evaluation.summary import KnowledgeHealth, PrequentialSummary, RunSummary
from testtime.experiments.adaptive_pairs import AdaptiveComparison, compare_adaptive
from testtime.experiments.curves import outside_legend
from testtime.experiments.viewer.data import LoadedRun, load_run
from testtime.run.lifecycle import continue_command

# What decides accuracy besides the method: a baseline must share all of it (and the solvers' sampling).
MATCHED = ("bench", "model", "limit", "bench_options")
SAMPLING = ("temperature", "top_p", "max_tokens")
TOLERANCE = 0.10  # a baseline's tokens within 10% of the method's count as the same budget


class Baseline(BaseModel):
    """A majority baseline beside a run at one kind of budget, or (`none`) why there is none. `budget` is
    what was matched: "solver rollouts" (k = the method's solver samples per problem) or "tokens" (k = the
    samples the method's tokens per problem buy). `exact_budget` is true only when the baseline's tokens are
    within 10% of the method's and k needed no cap."""

    model_config = ConfigDict(extra="forbid")

    budget: str = ""
    run: str | None = None
    k: int | None = None
    exact_budget: bool | None = None
    method_tokens_per_problem: float | None = None
    baseline_tokens_per_problem: float | None = None
    accuracy: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    interval: str | None = None
    difference: Interval | None = None  # the run − the baseline, paired by problem
    none: str | None = None


class ReportRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run: str
    method: str
    bench: str
    model: str
    method_config: dict[str, Any]
    problems: int
    accuracy: Interval | None
    rollouts_per_problem: int
    calls: int
    tokens: int
    cost_usd: float | None  # None: some price unknown
    known_cost_usd: float
    sandbox_seconds: float
    train_tokens: int
    train_flops: float | None
    complete: bool
    uses_labels: bool = False  # trained on the labels (TTRL's oracle): an upper bound, never paired as label-free
    prequential: PrequentialSummary | None = None  # a stream: accuracy over arrival order (its own accuracy)
    majority_same_rollouts: Baseline | None  # None for a majority run itself
    majority_same_tokens: Baseline | None
    provenance: list[dict[str, Any]]
    adaptive_vs_fixed: AdaptiveComparison | None = None  # an --adaptive run beside its fixed twin; else None
    trt_knowledge: KnowledgeHealth | None = None  # TRT: strategy lists and reflections parsed, lessons entered


class Unfinished(BaseModel):
    """A run among the inputs with no summary yet (killed, stopped, or still running): listed, not compared."""

    model_config = ConfigDict(extra="forbid")

    run: str
    kind: str
    method: str
    answered: int  # problems (requests) with a result so far
    continue_with: str  # the command that continues it


class Report(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = 2
    runs: list[ReportRow]
    unfinished: list[Unfinished] = []


@dataclass
class Finished:
    loaded: LoadedRun
    summary: RunSummary


def _unfinished(run: LoadedRun) -> Unfinished:
    manifest = run.manifest
    return Unfinished(
        run=str(run.path),
        kind=manifest.kind,
        method=manifest.run.method,
        answered=len(run.records),
        continue_with=continue_command(run.path, manifest),
    )


def _settings(run: Finished) -> dict[str, Any]:
    manifest = run.loaded.manifest
    settings = manifest.run.model_dump()
    effective = manifest.effective.sampling.get("solve") if manifest.effective else None
    solve = effective.model_dump() if effective else settings  # older runs: the flags as asked
    described = {k: v for k, v in manifest.benchmark.items() if k != "data_dir"}
    return {
        **{k: settings.get(k) for k in MATCHED},
        **{f"solver {k}": solve.get(k) for k in SAMPLING},
        "benchmark": described,
        # served requests graded later pair on the questions both endpoints were asked
        "problems": "served, paired by question" if run.loaded.asked else sorted(run.loaded.records),
    }


def _pairing(run: Finished) -> dict[str, str]:
    """What a run's results pair on → the result's id: a problem's own id; for a served run graded later, the
    question each request asked and the how-manieth time it was asked (two endpoints served the same questions
    under their own request ids)."""
    asked = run.loaded.asked
    if not asked:
        return {pid: pid for pid in run.loaded.records}
    keys: dict[str, str] = {}
    times: Counter[str] = Counter()
    for request in run.loaded.records:  # in the order they were answered
        question = asked.get(request)
        if question is not None:
            keys[f"{question}#{times[question]}"] = request
            times[question] += 1
    return keys


def _differences(run: Finished, other: Finished) -> list[str]:
    mine, theirs = _settings(run), _settings(other)
    return [
        f"{k} {theirs[k]!r} vs {mine[k]!r}" if k != "problems" else "other problems"
        for k in mine
        if mine[k] != theirs[k]
    ]


def _rollouts(run: Finished) -> int:
    """The method's solver samples per problem. TTRL's `same_budget_majority_n` is its tokens' k (the field
    predates the two baselines), so a TTRL run's rollouts are the samples its answer is drawn from."""
    if run.summary.ttrl is not None:
        return run.summary.n or run.loaded.manifest.run.n or 1
    return run.summary.same_budget_majority_n or run.summary.n or run.loaded.manifest.run.n or 1


def _tokens_per_problem(run: Finished) -> float:
    """Everything the method spent per problem: every call's tokens (TTRL: its training and answer too)."""
    ttrl = run.summary.ttrl
    if ttrl is not None and ttrl.compute is not None:
        return ttrl.compute.tokens_per_problem
    return run.summary.ledger.tokens / max(run.summary.problems, 1)


def _baselines(run: Finished, majorities: list[Finished]) -> tuple[Baseline, Baseline]:
    """Majority at the method's solver rollouts, and at the method's tokens; or why there is none."""
    reasons = []
    for majority in majorities:
        records = list(majority.loaded.records.values())
        if majority is run or not records:
            continue
        if records[0].cluster_of is None:
            reasons.append(f"{majority.loaded.path.name}: no answer classes (code)")
            continue
        differs = _differences(run, majority)
        if differs:
            reasons.append(f"{majority.loaded.path.name}: {'; '.join(differs)}")
            continue
        mine, theirs = _pairing(run), _pairing(majority)
        labelled = {k for k, p in mine.items() if run.loaded.records[p].labelled}
        ids = sorted(k for k in labelled if k in theirs and majority.loaded.records[theirs[k]].labelled)
        pairs = [(run.loaded.records[mine[k]], majority.loaded.records[theirs[k]]) for k in ids]
        if not pairs:
            reasons.append(f"{majority.loaded.path.name}: no labelled problem to compare on")
            continue
        n = min(len(r.candidates) for r in records)
        per_sample = majority.summary.ledger.tokens / max(len(records) * n, 1)
        spent = _tokens_per_problem(run)
        wanted = {"solver rollouts": _rollouts(run), "tokens": max(1, round(spent / per_sample)) if per_sample else 1}
        return tuple(  # type: ignore[return-value]
            _at(majority, pairs, budget, k, n, per_sample, spent) for budget, k in wanted.items()
        )
    why = "no majority run among the inputs" if not reasons else "settings differ: " + " | ".join(reasons)
    return Baseline(budget="solver rollouts", none=why), Baseline(budget="tokens", none=why)


def _at(
    majority: Finished,
    pairs: list[tuple[ResultRecord, ResultRecord]],
    budget: str,
    wanted: int,
    n: int,
    per_sample: float,
    spent: float,
) -> Baseline:
    """Majority at k beside the run, over (the run's result, the majority's) paired by problem."""
    k = min(wanted, n)
    baseline = [maj_at_k(theirs.cluster_of or (), theirs.cluster_correct or (), k) for _, theirs in pairs]
    method = [float(bool(mine.correct)) for mine, _ in pairs]
    ci = mean_ci(baseline)
    return Baseline(
        budget=budget,
        run=str(majority.loaded.path),
        k=k,
        exact_budget=k == wanted and abs(k * per_sample - spent) <= TOLERANCE * spent,
        method_tokens_per_problem=spent,
        baseline_tokens_per_problem=k * per_sample,
        accuracy=ci.mean if ci else None,
        ci_low=ci.ci_low if ci else None,
        ci_high=ci.ci_high if ci else None,
        interval=ci.interval if ci else None,
        difference=paired_difference_ci(method, baseline),  # method − baseline, paired by problem
    )


def _provenance(run: LoadedRun) -> list[dict[str, Any]]:
    out = []
    paid = [e for e in run.ledger if e.kind == "model_call" and not e.cached]
    for record in run.records.values():
        audit = record.round_audit
        if not audit:
            continue
        flips = [
            {"round": t + 1, "to": "correct" if now else "wrong"}
            for t, (before, now) in enumerate(zip([False, *audit.accuracy], audit.accuracy, strict=False))
            if before != now
        ]
        first = next((t + 1 for t, ok in enumerate(audit.accuracy) if ok), None)
        strategy = spent = None
        if first is not None:
            chosen_round = record.rounds[first - 1]
            chosen = chosen_round.selection.index if chosen_round.selection else None
            strategy = next((c.strategy for c in chosen_round.candidates if c.index == chosen), None)
            spent = sum(
                e.prompt_tokens + e.completion_tokens
                for e in paid
                if e.problem_id == record.problem_id and (e.step or 0) <= first
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


def build_report(paths: list[Path]) -> Report:
    if not paths:
        raise UserError("report needs at least one run directory")
    loaded = [load_run(p) for p in paths]
    runs = [Finished(r, r.summary) for r in loaded if r.summary is not None]
    unfinished = [_unfinished(r) for r in loaded if r.summary is None]
    if not runs:
        raise UserError(
            "no run to compare has finished: "
            + "; ".join(f"{u.run} has no summary.json yet, continue it with {u.continue_with}" for u in unfinished)
        )
    majorities = [r for r in runs if _method(r) == "majority"]
    rows = []
    for run in runs:
        summary, ledger, settings = run.summary, run.summary.ledger, run.loaded.manifest.run
        rows.append(
            ReportRow(
                run=str(run.loaded.path),
                method=_method(run),
                bench=settings.bench,
                model=settings.model,
                method_config=run.loaded.manifest.method,
                problems=summary.problems,
                accuracy=summary.accuracy,
                rollouts_per_problem=_rollouts(run),
                calls=ledger.calls,
                tokens=ledger.tokens,
                cost_usd=ledger.cost_usd,
                known_cost_usd=ledger.known_cost_usd,
                sandbox_seconds=ledger.sandbox_seconds,
                train_tokens=ledger.train_tokens,
                train_flops=ledger.train_flops,
                complete=summary.complete,
                uses_labels=summary.uses_labels,
                prequential=summary.prequential,
                **_baseline_fields(run, majorities),
                provenance=_provenance(run.loaded),
                adaptive_vs_fixed=compare_adaptive(run, runs, _differences),
                trt_knowledge=summary.trt_knowledge,
            )
        )
    return Report(runs=rows, unfinished=unfinished)


def _method(run: Finished) -> str:
    """What answered: the summary's name (a served run's requests may pick several: `majority+trt`), else the
    run's --method."""
    return run.summary.method or run.loaded.manifest.run.method


def _baseline_fields(run: Finished, majorities: list[Finished]) -> dict[str, Baseline | None]:
    if _method(run) == "majority":
        return {"majority_same_rollouts": None, "majority_same_tokens": None}
    if run.summary.uses_labels:  # an upper bound: beside a label-free baseline it would read as a method's gain
        why = "uses labels (oracle reward): an upper bound, not compared as a label-free method"
        return {
            "majority_same_rollouts": Baseline(budget="solver rollouts", none=why),
            "majority_same_tokens": Baseline(budget="tokens", none=why),
        }
    rollouts, tokens = _baselines(run, majorities)
    return {"majority_same_rollouts": rollouts, "majority_same_tokens": tokens}


def plot_report(report: Report, path: Path) -> Path:
    """Each run's accuracy and, beside it (not on it), its same-budget majority, with 95% intervals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report.runs
    figure, ax = plt.subplots(figsize=(max(5.5, 1.8 * len(rows)), 4.8))
    labelled = False
    for i, row in enumerate(rows):
        acc = row.accuracy
        if acc is not None:
            ax.bar(i - 0.18, acc.mean, width=0.34, color="#4c72b0", label="run" if i == 0 else None)
            _error_bar(ax, i - 0.18, acc.mean, acc.ci_low, acc.ci_high)
        base = row.majority_same_tokens
        if base is not None and base.accuracy is not None:
            label = None if labelled else "majority at the same tokens"
            ax.bar(i + 0.18, base.accuracy, width=0.34, color="#dd8452", label=label)
            _error_bar(ax, i + 0.18, base.accuracy, base.ci_low or 0.0, base.ci_high or 0.0)
            labelled = True
    ax.set_xticks(range(len(rows)), [f"{r.method}\n{Path(r.run).name[:24]}" for r in rows], fontsize=8)
    ax.set_xlabel("run (the tokens it spent per problem set the majority's k)")
    ax.set_ylabel("accuracy (95% CI)")
    ax.set_ylim(0, 1)
    benches = sorted({r.bench for r in rows})
    models = sorted({r.model for r in rows})
    ax.set_title(f"{', '.join(benches)} · {', '.join(models)}: each run beside majority at its tokens", fontsize=10)
    outside_legend(ax)
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)
    return path


def plot_prequential(report: Report, path: Path) -> Path | None:
    """Stream runs' running accuracy over arrival order; a run that is not a stream (offline TTRL, which saw
    every problem before answering) is its accuracy as a dashed line beside them. None: no stream run."""
    streams = [row for row in report.runs if row.prequential is not None]
    if not streams:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots(figsize=(7, 4.4))
    for row in streams:
        assert row.prequential is not None
        running = [v if v is not None else float("nan") for v in row.prequential.running_accuracy]
        ax.plot(range(1, len(running) + 1), running, label=f"{row.method} · {Path(row.run).name[:28]}")
    for row in report.runs:
        if row.prequential is None and row.accuracy is not None:
            ax.axhline(row.accuracy.mean, linestyle="--", color="grey", linewidth=1)
            ax.annotate(f"{row.method} · {Path(row.run).name[:28]} (not a stream)", (1, row.accuracy.mean), fontsize=7)
    ax.set_xlabel("arrivals (each answered before anything was learned from it)")
    ax.set_ylabel("running accuracy over the labelled arrivals")
    ax.set_ylim(0, 1)
    ax.set_title("prequential accuracy", fontsize=10)
    outside_legend(ax)
    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)
    return path


def _error_bar(ax: Any, x: float, mean: float, low: float, high: float) -> None:
    ax.errorbar(x, mean, yerr=[[mean - low], [high - mean]], color="black", capsize=4)
