"""The scorer: grades each method result against its sealed reference and builds the run summary.

This is the only code path (besides the audit) that reads references. Per problem it grades the method's
prediction and every sample, so pass@1 (avg@k) and maj@k come from the same samples.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from statistics import fmean as mean
from typing import Any

from testtime.benchmarks.base import Benchmark
from testtime.benchmarks.code_common import graded_program
from testtime.benchmarks.dataset import graded_answer
from testtime.core.adaptive import AdaptiveStop
from testtime.core.answers.freeform import final_reply
from testtime.core.ledger import LedgerTotals
from testtime.core.records import Reference
from testtime.core.results import Grading, ProblemResult, ResultRecord, RoundAudit, RoundRecord, TTRLStep
from testtime.evaluation.caveats import judge_fell_back, knowledge_stayed_empty, measured_nothing
from testtime.evaluation.labelfree import distribution, label_free
from testtime.evaluation.metrics import maj_at_k, mean_ci, powers_of_two_upto, vote_clusters
from testtime.evaluation.summary import (
    AdaptiveSummary,
    KnowledgeHealth,
    LedgerSummary,
    RoundsSummary,
    RunSummary,
)
from testtime.evaluation.ttrl_audit import audit_ttrl, summarize_ttrl


def score(benchmark: Benchmark, result: ProblemResult, reference: Reference) -> Grading:
    """The grade of one result, to be written beside it in results.jsonl."""
    if not reference.labelled:
        return unlabelled(benchmark.domain, result)
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
        reference=reference.answer,
        hidden_tests=len(reference.hidden_tests) if benchmark.domain == "code" else None,
        sample_correct=sample_correct,
        sample_status=tuple(g.status if g else "error" if f else missing for g, f in zip(grades, failed, strict=True)),
        public_only=bool(reference.metadata.get("public_only")),
        erratum=reference.metadata.get("erratum"),
        round_audit=audit_rounds(benchmark, result.rounds, reference) if result.rounds else None,
        ttrl_audit=audit_ttrl(benchmark, result.ttrl, reference) if result.ttrl else None,
        cluster_of=cluster_of,
        cluster_correct=cluster_correct,
    )


def unlabelled(domain: str, result: ProblemResult) -> Grading:
    """A problem with nothing to grade against: what was answered, and the classes the samples fall in (the
    vote needs no label), but no verdict and no audit."""
    code = domain == "code"
    graded = _graded(domain, result.prediction)
    failed = [bool(c.error) for c in result.candidates]
    missing = "no_code" if code else "no_answer"
    if graded is not None:
        status = "unlabelled"
    else:
        status = "error" if failed and all(failed) else missing
    answers = [c.answer for c in result.candidates]
    cluster_of = None
    if domain not in ("code", "text") and not result.rounds:  # free-form replies have no answer relation
        cluster_of = tuple(vote_clusters(answers, [False] * len(answers))[0])
    return Grading(
        correct=None,
        graded_answer=graded,
        status=status,
        sample_status=tuple(
            "error" if f else "unlabelled" if a is not None else missing for a, f in zip(answers, failed, strict=True)
        ),
        cluster_of=cluster_of,
    )


def _graded(domain: str, prediction: str | None) -> str | None:
    """What an unlabelled prediction answers: a program, a free-form reply, or a math answer."""
    if domain == "code":
        return graded_program(prediction)
    if domain == "text":
        return final_reply(prediction) if prediction is not None else None
    return graded_answer(prediction)


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


def summarize(
    records: Sequence[ResultRecord], ledger: LedgerTotals, seed: int = 0, steps: Sequence[TTRLStep] = (), **run: Any
) -> RunSummary:
    """The run summary: accuracy with its interval, pass@1, maj@k (over the labelled problems), failure rates,
    the label-free quantities (over every problem) and the ledger's totals. `run` adds the run's own fields
    (method, bench, model, n, wall_s, complete, stopped, warnings from its settings...); `steps` are TTRL's
    logged optimiser steps."""
    labelled = [r for r in records if r.labelled]
    samples = [c for r in records for c in r.candidates]
    # Nothing measured when every sample failed (a run with no key): an accuracy would be a fabricated 0.
    measured = not samples or any(not c.error for c in samples)
    n_min = min((len(r.candidates) for r in labelled), default=0)
    values: dict[str, Any] = {
        "problems": len(records),
        "labelled": len(labelled),
        "unlabelled": len(records) - len(labelled),
        "accuracy": mean_ci([float(bool(r.correct)) for r in labelled], seed) if measured else None,
        "samples": len(samples),
        "prediction_status": dict(Counter(r.status for r in records)),
        "sample_status": dict(Counter(s for r in records for s in r.sample_status)),
        "ledger": LedgerSummary.of(ledger),
        "calls_per_problem": (ledger.calls + ledger.cache_hits) / len(records) if records else None,
        "label_free": label_free(records, steps) if records else None,
    }
    with_samples = [r for r in labelled if r.sample_correct]
    if with_samples and measured:
        values["pass@1"] = mean_ci([mean(r.sample_correct) for r in with_samples], seed)
        if n_min and all(r.cluster_correct is not None for r in with_samples):
            values["maj@k"] = {
                str(k): mean(maj_at_k(r.cluster_of or (), r.cluster_correct or (), k, seed) for r in with_samples)
                for k in powers_of_two_upto(n_min)
            }
    if samples:
        values["no_answer_rate"] = mean(c.answer is None and not c.error for c in samples)
        calls = ledger.calls + ledger.cache_hits  # every kind of call, not only the final samples
        values["truncation_rate"] = (
            ledger.truncated_calls / calls if calls else mean(c.finish_reason == "length" for c in samples)
        )
        values["error_rate"] = mean(bool(c.error) for c in samples)
        values["first_error"] = next((c.error[:300] for c in samples if c.error), None)
    audits = [r.round_audit for r in labelled if r.round_audit]
    if audits:
        depth = min(len(a.accuracy) for a in audits)
        values["rounds"] = RoundsSummary(
            accuracy=[mean(a.accuracy[t] for a in audits) for t in range(depth)],
            coverage=[mean(a.coverage[t] for a in audits) for t in range(depth)],
            pass_at_1=[mean(a.rollout_mean[t] for a in audits) for t in range(depth)],
        )
    health = knowledge_health(records) or ttrl_knowledge_health(steps)
    if health is not None:
        values["trt_knowledge"] = health
    rollouts = [sum(len(r.candidates) for r in record.rounds) for record in records if record.rounds]
    if rollouts:  # the fair baseline spends the same solver rollouts on independent samples: majority at n = T·K
        values["same_budget_majority_n"] = round(mean(rollouts))
    if any(r.ttrl_audit for r in labelled):
        values["ttrl"] = summarize_ttrl(labelled, seed)
    stops = [r.adaptive for r in records if r.adaptive is not None]
    if stops:
        values["adaptive"] = adaptive_summary(stops)
    values["graded_on_public_tests_only"] = sum(r.public_only for r in records)  # loud: optimistic scores
    values["errata_problems"] = [r.problem_id for r in records if r.erratum]
    said = [*measured_nothing(records, str(run.get("method", ""))), *judge_fell_back(values["label_free"])]
    said += knowledge_stayed_empty(health, str(run.get("method", "")))
    run["warnings"] = [*run.get("warnings", ()), *said]
    return RunSummary.model_validate({**values, **run})


def knowledge_health(records: Sequence[ResultRecord]) -> KnowledgeHealth | None:
    """TRT's strategy lists, reflections and lessons over the run, from its round records; None where no round
    asked for strategies or reflected (another method, or TRT with both off)."""
    rounds = [r for record in records for r in record.rounds]
    firsts = [r.strategies_parsed for r in rounds if r.strategies_parsed is not None]
    reflected = [r.reflection_parsed for r in rounds if r.reflection_parsed is not None]
    if not firsts and not reflected:
        return None
    lists = [[r.lessons_added for r in record.rounds if r.lessons_added is not None] for record in records]
    kept = any(lists)
    return KnowledgeHealth(
        strategy_lists=len(firsts),
        strategy_lists_parsed=sum(firsts),
        reflections=len(reflected),
        reflections_parsed=sum(reflected),
        lessons_entered=sum(sum(added) for added in lists) if kept else None,
        problems_with_lessons=sum(sum(added) > 0 for added in lists) if kept else None,
    )


def ttrl_knowledge_health(steps: Sequence[TTRLStep]) -> KnowledgeHealth | None:
    """TTRL with knowledge=trt: its rollout steps' reflections and lessons (no strategy lists); None without."""
    counted = [s.knowledge for s in steps if s.knowledge is not None]
    if not counted:
        return None
    return KnowledgeHealth(
        strategy_lists=0,
        strategy_lists_parsed=0,
        reflections=sum(k.asked for k in counted),
        reflections_parsed=sum(k.parsed for k in counted),
        lessons_entered=sum(k.entered for k in counted),
        problems_with_lessons=None,  # a step's counts do not say which prompts
    )


def adaptive_summary(stops: Sequence[AdaptiveStop]) -> AdaptiveSummary:
    """The votes' samples against their cap's, over the problems an --adaptive run answered."""
    drawn, cap = sum(s.drawn for s in stops), sum(s.cap for s in stops)
    spread = distribution([float(s.drawn) for s in stops])
    assert spread is not None, "one stop at least"
    # a served run's requests may each ask for their own rule: the summary names each, with its votes
    rules = Counter(f"{s.rule} {s.threshold:g}" if s.threshold is not None else s.rule for s in stops)
    (rule, threshold), _ = Counter((s.rule, s.threshold) for s in stops).most_common(1)[0]
    return AdaptiveSummary(
        rule=rule,
        threshold=threshold,
        rules=dict(rules) if len(rules) > 1 else None,
        samples=drawn,
        cap_samples=cap,
        share=drawn / cap,
        settled=sum(s.reason == "settled" for s in stops),
        drawn=spread,
    )
