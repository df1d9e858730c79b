"""The scorer: grades each method result against its sealed reference and builds the run summary.

This is the only code path (besides the audit) that reads references. Per problem it grades the method's
prediction and every sample, so pass@1 (avg@k) and maj@k come from the same samples.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from statistics import mean
from typing import Any

from testtime.benchmarks.base import Benchmark
from testtime.benchmarks.metrics import maj_at_k, mean_ci, powers_of_two_upto, vote_clusters
from testtime.benchmarks.ttrl_audit import audit_ttrl, summarize_ttrl
from testtime.core.records import Reference
from testtime.core.results import Grading, ProblemResult, ResultRecord, RoundAudit, RoundRecord


def score(benchmark: Benchmark, result: ProblemResult, reference: Reference) -> Grading:
    """The grade of one result, to be written beside it in results.jsonl."""
    grade = benchmark.grade(result.prediction, reference)
    answers = [c.answer for c in result.candidates]
    missing = "no_code" if benchmark.domain == "code" else "no_answer"
    grades = [benchmark.grade(a, reference) if a is not None else None for a in answers]
    # A failed call is an error, not a missing answer: the labels must agree with the rates in the summary.
    failed = [bool(c.error) for c in result.candidates]
    status = "error" if grade.answer is None and failed and all(failed) else grade.status
    sample_correct = tuple(bool(g and g.correct) for g in grades)
    cluster_of = cluster_correct = None
    # maj@k needs answer equivalence (programs have none) and independent samples (rounds condition on each other)
    if benchmark.domain == "math" and not result.rounds:
        classes, correct = vote_clusters(answers, sample_correct)
        cluster_of, cluster_correct = tuple(classes), tuple(correct)
    return Grading(
        correct=grade.correct,
        graded_answer=grade.answer,
        status=status,
        sample_correct=sample_correct,
        sample_status=tuple(g.status if g else "error" if f else missing for g, f in zip(grades, failed, strict=True)),
        public_only=bool(reference.metadata.get("public_only")),
        erratum=reference.metadata.get("erratum"),
        round_audit=audit_rounds(benchmark, result.rounds, reference) if result.rounds else None,
        ttrl_audit=audit_ttrl(benchmark, result.ttrl, reference) if result.ttrl else None,
        cluster_of=cluster_of,
        cluster_correct=cluster_correct,
    )


def audit_rounds(benchmark: Benchmark, rounds: Sequence[RoundRecord], reference: Reference) -> RoundAudit:
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
    for record in sorted(rounds, key=lambda r: r.round):
        graded = [correct(c.answer) for c in record.candidates]
        covered = covered or any(graded)
        accuracy.append(correct(record.selected_answer))
        coverage.append(covered)
        population.append(sum(graded) / len(graded) if graded else 0.0)
    return RoundAudit(accuracy=tuple(accuracy), coverage=tuple(coverage), rollout_mean=tuple(population))


def summarize(records: Sequence[ResultRecord], ledger: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """The run summary: accuracy with CIs, avg@k, maj@k, failure rates and the ledger's totals."""
    problems = len(records)
    samples = [c for r in records for c in r.candidates]
    n_min = min((len(r.candidates) for r in records), default=0)
    summary: dict[str, Any] = {
        "problems": problems,
        "accuracy": mean_ci([float(r.correct) for r in records], seed),
        "samples": len(samples),
    }
    with_samples = [r for r in records if r.sample_correct]
    if with_samples:
        summary["pass@1_avg"] = mean_ci([mean(r.sample_correct) for r in with_samples], seed)
        if n_min and all(r.cluster_of is not None for r in with_samples):
            summary["maj@k"] = {
                str(k): mean(maj_at_k(r.cluster_of or (), r.cluster_correct or (), k, seed) for r in with_samples)
                for k in powers_of_two_upto(n_min)
            }
    if samples:
        summary["no_answer_rate"] = mean(c.answer is None and not c.error for c in samples)
        summary["truncation_rate"] = mean(c.finish_reason == "length" for c in samples)
        summary["error_rate"] = mean(bool(c.error) for c in samples)
        errors = [c.error for c in samples if c.error]
        if errors:
            summary["first_error"] = errors[0][:300]
    audits = [r.round_audit for r in records if r.round_audit]
    if audits:
        depth = min(len(a.accuracy) for a in audits)
        summary["rounds"] = {
            "accuracy": [mean(a.accuracy[t] for a in audits) for t in range(depth)],
            "coverage": [mean(a.coverage[t] for a in audits) for t in range(depth)],
            "rollout_mean": [mean(a.rollout_mean[t] for a in audits) for t in range(depth)],
        }
        rollouts = [sum(len(r.candidates) for r in record.rounds) for record in records if record.rounds]
        # The fair baseline spends the same solver rollouts on independent samples: majority at n = T·K.
        summary["same_budget_majority_n"] = round(mean(rollouts)) if rollouts else None
    if any(r.ttrl_audit for r in records):
        summary["ttrl"] = summarize_ttrl(records, seed)
    summary["prediction_status"] = dict(Counter(r.status for r in records))
    if any(r.sample_status for r in records):
        summary["sample_status"] = dict(Counter(s for r in records for s in r.sample_status))
    public_only = sum(r.public_only for r in records)
    if public_only:
        # Loud on purpose: selectors may have seen these very tests, so scores are optimistic.
        summary["graded_on_public_tests_only"] = public_only
    errata = [r.problem_id for r in records if r.erratum]
    if errata:
        summary["errata_problems"] = errata
    summary["ledger"] = ledger
    summary["calls_per_problem"] = (ledger.get("calls", 0) + ledger.get("cache_hits", 0)) / max(problems, 1)
    return summary
