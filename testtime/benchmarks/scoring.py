"""The scorer: grades each method result against its sealed reference and builds the run summary.

This is the only code path (besides the audit) that reads references. Per problem it grades the method's
prediction and every sample, so pass@1 (avg@k) and maj@k come from the same samples.
"""

from __future__ import annotations

from collections import Counter
from statistics import mean
from typing import Any

from testtime.benchmarks.base import Benchmark
from testtime.benchmarks.metrics import bootstrap_ci, maj_at_k, powers_of_two_upto, vote_clusters
from testtime.benchmarks.ttrl_audit import audit_ttrl, summarize_ttrl
from testtime.core.records import Reference


def score(benchmark: Benchmark, result: dict[str, Any], reference: Reference) -> dict[str, Any]:
    """Grade fields to merge into a results.jsonl record."""
    grade = benchmark.grade(result.get("prediction"), reference)
    answers = [c.get("answer") for c in result.get("candidates", [])]
    missing = "no_code" if benchmark.domain == "code" else "no_answer"
    grades = [benchmark.grade(a, reference) if a is not None else None for a in answers]
    fields: dict[str, Any] = {
        "correct": grade.correct,
        "graded_answer": grade.answer,
        "status": grade.status,
        "sample_correct": [bool(g and g.correct) for g in grades],
        "sample_status": [g.status if g else missing for g in grades],
    }
    if reference.metadata.get("public_only"):
        fields["public_only"] = True
    rounds = result.get("details", {}).get("rounds")
    if rounds:
        fields["round_audit"] = audit_rounds(benchmark, rounds, reference)
    ttrl = result.get("details", {}).get("ttrl")
    if ttrl:
        fields["ttrl_audit"] = audit_ttrl(benchmark, ttrl, reference)
    # maj@k needs answer equivalence (programs have none) and independent samples (rounds condition on each other)
    if benchmark.domain == "math" and not rounds:
        cluster_of, cluster_correct = vote_clusters(answers, fields["sample_correct"])
        fields.update(cluster_of=cluster_of, cluster_correct=cluster_correct)
    return fields


def audit_rounds(benchmark: Benchmark, rounds: list[dict[str, Any]], reference: Reference) -> dict[str, list[Any]]:
    """Per round, from the sealed reference: was the selected answer correct, had any rollout so far been
    correct (oracle coverage; not accuracy: what a perfect selector could have reached), and the mean accuracy
    of the round's rollouts (RSA's population metric)."""
    verdicts: dict[str, bool] = {}

    def correct(answer: str | None) -> bool:
        if answer is None:
            return False
        if answer not in verdicts:  # a program or answer seen again is not graded again
            verdicts[answer] = benchmark.grade(answer, reference).correct
        return verdicts[answer]

    accuracy, coverage, population, covered = [], [], [], False
    for record in sorted(rounds, key=lambda r: r["round"]):
        graded = [correct(c.get("answer")) for c in record.get("candidates", [])]
        covered = covered or any(graded)
        accuracy.append(correct(record.get("selected_answer")))
        coverage.append(covered)
        population.append(sum(graded) / len(graded) if graded else 0.0)
    return {"accuracy": accuracy, "coverage": coverage, "rollout_mean": population}


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
        if n_min and all("cluster_of" in r for r in with_samples):
            summary["maj@k"] = {
                str(k): mean(maj_at_k(r["cluster_of"], r["cluster_correct"], k, seed) for r in with_samples)
                for k in powers_of_two_upto(n_min)
            }
    if samples:
        summary["no_answer_rate"] = mean(c.get("answer") is None and not c.get("error") for c in samples)
        summary["truncation_rate"] = mean(c.get("finish_reason") == "length" for c in samples)
        summary["error_rate"] = mean(bool(c.get("error")) for c in samples)
    audits = [r["round_audit"] for r in records if r.get("round_audit")]
    if audits:
        depth = min(len(a["accuracy"]) for a in audits)
        summary["rounds"] = {
            "accuracy": [mean(a["accuracy"][t] for a in audits) for t in range(depth)],
            "coverage": [mean(a["coverage"][t] for a in audits) for t in range(depth)],
            "rollout_mean": [mean(a["rollout_mean"][t] for a in audits) for t in range(depth)],
        }
        rollouts = [
            sum(len(r["candidates"]) for r in rec["details"]["rounds"]) for rec in records if rec.get("details")
        ]
        # The fair baseline spends the same solver rollouts on independent samples: majority at n = T·K.
        summary["same_budget_majority_n"] = round(mean(rollouts)) if rollouts else None
    if any(r.get("ttrl_audit") for r in records):
        summary["ttrl"] = summarize_ttrl(records, seed)
    summary["prediction_status"] = dict(Counter(r.get("status", "") for r in records))
    if any("sample_status" in r for r in records):
        summary["sample_status"] = dict(Counter(s for r in records for s in r.get("sample_status", [])))
    public_only = sum(bool(r.get("public_only")) for r in records)
    if public_only:
        # Loud on purpose: selectors may have seen these very tests, so scores are optimistic.
        summary["graded_on_public_tests_only"] = public_only
    errata = [r["problem_id"] for r in records if r.get("erratum")]
    if errata:
        summary["errata_problems"] = errata
    summary["ledger"] = ledger
    summary["calls_per_problem"] = (ledger.get("calls", 0) + ledger.get("cache_hits", 0)) / max(problems, 1)
    return summary
