"""The scorer: grades each method result against its sealed reference and builds the run summary.

This is the only code path (besides the audit) that reads references. Per problem it grades the method's
prediction and every sample, so pass@1 (avg@k) and maj@k come from the same samples.
"""

from __future__ import annotations

from statistics import mean
from typing import Any

from testtime.benchmarks.base import Benchmark
from testtime.benchmarks.metrics import bootstrap_ci, maj_at_k, powers_of_two_upto
from testtime.core.answers import cluster_answers
from testtime.core.records import Reference


def score(benchmark: Benchmark, result: dict[str, Any], reference: Reference) -> dict[str, Any]:
    """Grade fields to merge into a results.jsonl record."""
    grade = benchmark.grade(result.get("prediction"), reference)
    candidates = result.get("candidates", [])
    answers = [c.get("answer") for c in candidates]
    sample_correct = [benchmark.grade(a, reference).correct if a is not None else False for a in answers]
    cluster_of = [-1] * len(answers)
    cluster_correct = []
    for cid, members in enumerate(cluster_answers(answers)):
        for i in members:
            cluster_of[i] = cid
        cluster_correct.append(sample_correct[members[0]])
    return {
        "correct": grade.correct,
        "graded_answer": grade.answer,
        "status": grade.status,
        "sample_correct": sample_correct,
        "cluster_of": cluster_of,
        "cluster_correct": cluster_correct,
    }


def _with_ci(values: list[float], seed: int) -> dict[str, float]:
    low, high = bootstrap_ci(values, seed=seed)
    return {"mean": mean(values) if values else 0.0, "ci_low": low, "ci_high": high}


def summarize(records: list[dict[str, Any]], ledger: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """The run summary: accuracy with CIs, avg@k, maj@k, failure rates and the ledger's totals."""
    problems = len(records)
    samples = [c for r in records for c in r.get("candidates", [])]
    n_min = min((len(r.get("candidates", [])) for r in records), default=0)
    summary: dict[str, Any] = {
        "problems": problems,
        "accuracy": _with_ci([float(r["correct"]) for r in records], seed),
        "samples": len(samples),
    }
    with_samples = [r for r in records if r.get("sample_correct")]
    if with_samples:
        summary["pass@1_avg"] = _with_ci([mean(r["sample_correct"]) for r in with_samples], seed)
        summary["maj@k"] = (
            {
                str(k): _with_ci(
                    [maj_at_k(r["cluster_of"], r["cluster_correct"], k, seed) for r in with_samples], seed
                )["mean"]
                for k in powers_of_two_upto(n_min)
            }
            if n_min
            else {}
        )
    if samples:
        summary["no_answer_rate"] = mean(c.get("answer") is None and not c.get("error") for c in samples)
        summary["truncation_rate"] = mean(c.get("finish_reason") == "length" for c in samples)
        summary["error_rate"] = mean(bool(c.get("error")) for c in samples)
    summary["ledger"] = ledger
    summary["calls_per_problem"] = (ledger.get("calls", 0) + ledger.get("cache_hits", 0)) / max(problems, 1)
    return summary
