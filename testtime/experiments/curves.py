"""Accuracy-versus-compute points from finished runs, all compute read from their ledgers.

A TRT run yields its whole depth curve from the per-round audit; a majority run at n yields maj@k for every
k ≤ n (unbiased subsampling); an RSA run yields two curves per step (the vote, and pass@1: the population's
mean accuracy). Each point carries the solver rollouts per problem and the tokens per problem spent up to it,
with a 95% interval made as everywhere else: Wilson for a proportion of right answers, the bootstrap for maj@k
and pass@1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from testtime.core.errors import UserError
from testtime.core.ledger import read_entries
from testtime.evaluation.metrics import maj_at_k, mean_ci, powers_of_two_upto
from testtime.evaluation.ttrl_compute import TRAINING_CALLS
from testtime.run.directory import RunDir


class Point(BaseModel):
    series: str
    rollouts: float  # solver rollouts per problem
    tokens: float  # prompt + completion tokens per problem, every call of the method included
    accuracy: float
    ci_low: float
    ci_high: float
    problems: int


def point(series: str, rollouts: float, tokens: float, per_problem: list[float]) -> Point:
    interval = mean_ci(per_problem)
    if interval is None:
        raise ValueError(f"{series}: no problem to place a point on")
    return Point(
        series=series,
        rollouts=rollouts,
        tokens=tokens,
        accuracy=interval.mean,
        ci_low=interval.ci_low,
        ci_high=interval.ci_high,
        problems=len(per_problem),
    )


def run_points(path: Path) -> list[Point]:
    run = RunDir(path)
    manifest, records = run.read_manifest(), [r for r in run.read_results() if r.labelled]
    if not records:
        raise UserError(f"{path}: no labelled problem, so no accuracy to place on a curve")
    paid = [e for e in read_entries(run.ledger_path) if e.kind == "model_call" and not e.cached]
    method, problems = manifest.run.method, max(len(records), 1)
    if method == "majority":
        n = min(len(r.candidates) for r in records)
        points = []
        for k in powers_of_two_upto(n):
            tokens = sum(e.prompt_tokens + e.completion_tokens for e in paid if e.sample_index < k) / problems
            if records[0].cluster_of is not None:
                accuracy = [maj_at_k(r.cluster_of or (), r.cluster_correct or (), k) for r in records]
            elif k == n:
                accuracy = [float(r.correct) for r in records]  # code: the selection was made at n only
            else:
                continue
            points.append(point("majority", k, tokens, accuracy))
        return points
    if method in ("trt", "rsa"):
        label = _label(manifest.method)
        audits = [r.round_audit for r in records if r.round_audit]
        depth = min(len(a.accuracy) for a in audits)
        width = len(records[0].rounds[-1].candidates)
        points = []
        for t in range(depth):
            step = t + 1
            tokens = sum(e.prompt_tokens + e.completion_tokens for e in paid if (e.step or 0) <= step) / problems
            points.append(point(label, width * step, tokens, [float(a.accuracy[t]) for a in audits]))
            if method == "rsa":
                points.append(point(f"{label} pass@1", width * step, tokens, [a.rollout_mean[t] for a in audits]))
        return points
    accuracy = [float(r.correct) for r in records]
    if method == "ttrl":  # one point: the trained model's answer, at everything training cost (ttrl_compute)
        summary = run.read_summary()
        compute = summary.ttrl.compute if summary and summary.ttrl else None
        if compute is None:
            raise ValueError(f"{path}: a TTRL run without its compute summary (did training finish?)")
        samples = sum(e.purpose in TRAINING_CALLS for e in paid) / problems
        return [point("ttrl (after training)", samples + 1, compute.tokens_per_problem, accuracy)]
    tokens = sum(e.prompt_tokens + e.completion_tokens for e in paid) / problems
    return [point(method, len(records[0].candidates), tokens, accuracy)]


def _label(described: dict[str, Any]) -> str:
    if described["name"] == "rsa":
        return f"rsa N={described['population']} K={described['aggregate']}"
    return f"trt K={described['rollouts'] or ('default')}"


def plot(points: list[Point], out: Path, title: str) -> list[Path]:
    """Accuracy against rollouts and against tokens, one line per series, CIs as error bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for axis, label in (("rollouts", "solver rollouts per problem"), ("tokens", "tokens per problem")):
        figure, ax = plt.subplots(figsize=(8.5, 4.5))
        names = list(dict.fromkeys(p.series for p in points))
        for i, series in enumerate(names):
            mine = sorted((p for p in points if p.series == series), key=lambda p: getattr(p, axis))
            # Series that meet at one x would hide each other's error bars: nudge each a little (log scale).
            nudge = 2 ** (0.04 * (i - (len(names) - 1) / 2))
            xs = [getattr(p, axis) * nudge for p in mine]
            ys = [p.accuracy for p in mine]
            errors = [[p.accuracy - p.ci_low for p in mine], [p.ci_high - p.accuracy for p in mine]]
            ax.errorbar(xs, ys, yerr=errors, marker="o", capsize=3, label=series)
        ax.set_xscale("log", base=2)
        ax.set_xlabel(label)
        ax.set_ylabel("accuracy (95% CI)")
        ax.set_ylim(-0.02, 1.02)  # one scale for every plot, so plots compare at a glance
        ax.set_title(title)
        ax.grid(alpha=0.3)
        outside_legend(ax)
        path = out / f"accuracy_vs_{axis}.png"
        figure.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(figure)
        written.append(path)
    return written


def outside_legend(ax: Any) -> Any:
    """The legend right of the axes, never over a point (save with `bbox_inches="tight"` to keep it); none when
    nothing is labelled (a report of runs with no accuracy: served, unlabelled)."""
    if not ax.get_legend_handles_labels()[0]:
        return None
    return ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False)
