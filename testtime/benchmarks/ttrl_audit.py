"""TTRL's audit: what the label-free training did, judged against the sealed references, outside the method.

Per problem: the base model's samples and greedy answer (before training; the base maj@k comes from these
samples) and, for every training step that voted on it, TTRL's gold metrics (reference ttrl.md §7):
`label_accuracy` (was the pseudo-label right), `reward_accuracy` (share of kept samples whose pseudo reward
equals the true reward) and `ground_truth_ratio` (share of kept samples truly correct: the policy's accuracy
at the training temperature). The summary sets before beside after with a paired bootstrap CI of the gain.
"""

from __future__ import annotations

from collections import defaultdict
from statistics import mean
from typing import Any

from testtime.benchmarks.base import Benchmark
from testtime.benchmarks.metrics import bootstrap_ci, maj_at_k, powers_of_two_upto, vote_clusters
from testtime.core.records import Reference


def audit_ttrl(benchmark: Benchmark, ttrl: dict[str, Any], reference: Reference) -> dict[str, Any]:
    verdicts: dict[str, bool] = {}

    def correct(answer: str | None) -> bool:
        if answer is None:
            return False
        if answer not in verdicts:
            verdicts[answer] = benchmark.grade(answer, reference).correct
        return verdicts[answer]

    before = ttrl.get("before", {})
    answers = before.get("answers", [])
    sample_correct = [correct(a) for a in answers]
    cluster_of, cluster_correct = vote_clusters(answers, sample_correct)
    steps = []
    for vote in ttrl.get("votes", []):
        kept = [correct(a) for a in vote["answers"]]
        steps.append(
            {
                "step": vote["step"],
                "label_correct": correct(vote["label"]),
                "reward_accuracy": mean(float(r) == float(c) for r, c in zip(vote["rewards"], kept, strict=True))
                if kept
                else 0.0,
                "ground_truth_ratio": mean(kept) if kept else 0.0,
            }
        )
    greedy = {key: correct(ttrl[key]) for key in ("greedy_after",) if key in ttrl}
    if "greedy" in before:
        greedy["greedy_before"] = correct(before["greedy"])
    return {
        "before_sample_correct": sample_correct,
        "before_cluster_of": cluster_of,
        "before_cluster_correct": cluster_correct,
        **greedy,
        "steps": steps,
    }


def _ci(values: list[float], seed: int) -> dict[str, float]:
    low, high = bootstrap_ci(values, seed=seed)
    return {"mean": mean(values) if values else 0.0, "ci_low": low, "ci_high": high}


def summarize_ttrl(records: list[dict[str, Any]], seed: int = 0) -> dict[str, Any]:
    audited = [r for r in records if r.get("ttrl_audit") and r.get("sample_correct")]
    if not audited:
        return {}
    before = [mean(r["ttrl_audit"]["before_sample_correct"] or [0.0]) for r in audited]
    after = [mean(r["sample_correct"]) for r in audited]
    n_before = min(len(r["ttrl_audit"]["before_cluster_of"]) for r in audited)
    summary: dict[str, Any] = {
        "pass@1_before": _ci(before, seed),
        "pass@1_after": _ci(after, seed),
        "pass@1_gain": _ci([a - b for a, b in zip(after, before, strict=True)], seed),  # paired by problem
    }
    if n_before:
        summary["maj@k_before"] = {
            str(k): mean(
                maj_at_k(r["ttrl_audit"]["before_cluster_of"], r["ttrl_audit"]["before_cluster_correct"], k, seed)
                for r in audited
            )
            for k in powers_of_two_upto(n_before)
        }
    for key in ("greedy_before", "greedy_after"):
        if all(key in r["ttrl_audit"] for r in audited):
            summary[key] = mean(r["ttrl_audit"][key] for r in audited)
    by_step: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in audited:
        for s in r["ttrl_audit"]["steps"]:
            by_step[s["step"]].append(s)
    steps = sorted(by_step)
    summary["per_step"] = {
        "step": steps,
        **{
            key: [mean(s[key] for s in by_step[t]) for t in steps]
            for key in ("label_correct", "reward_accuracy", "ground_truth_ratio")
        },
    }
    return summary
