"""TTRL's audit: what the label-free training did, judged against the sealed references, outside the method.

Per problem: the base model's samples and greedy answer (before training; on math the base maj@k comes from these
samples) and, for every training step that voted on it, TTRL's gold metrics (reference ttrl.md §7): `label_accuracy`
(was the selected class right: its representative answer, or program, graded), `reward_accuracy` (share of kept
samples whose reward equals the true reward; null for rewards that are not 0/1) and `ground_truth_ratio` (share of
kept samples truly correct: the policy's accuracy at the training temperature), and whether any kept sample is
correct (pass@k of the training samples). Code programs are graded on the full evaluation suite in the sandbox, as
the final grade is. The summary sets before beside after with a paired bootstrap CI of the gain, and the collapse
signals TTRL-Guard (arXiv 2605.19444) names: correct-answer extinction (a prompt whose samples held the correct
answer at an earlier visit and hold it no more) and, for a label that went wrong (right at one visit, wrong at a
later one), how many steps later its correct answer went extinct.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from statistics import mean
from typing import Any

from testtime.benchmarks.base import Benchmark
from testtime.core.records import Reference
from testtime.core.results import ResultRecord, TTRLAudit, TTRLRecord, TTRLStepAudit
from testtime.evaluation.metrics import maj_at_k, mean_ci, paired_difference_ci, powers_of_two_upto, vote_clusters
from testtime.evaluation.summary import TTRLSummary


def audit_ttrl(benchmark: Benchmark, ttrl: TTRLRecord, reference: Reference) -> TTRLAudit:
    verdicts: dict[str, bool] = {}

    def correct(answer: str | None) -> bool:
        if answer is None:
            return False
        if answer not in verdicts:
            verdicts[answer] = benchmark.grade(answer, reference).correct
        return verdicts[answer]

    answers = list(ttrl.before.answers)
    sample_correct = [correct(a) for a in answers]
    cluster_of: list[int] = []
    cluster_correct: list[bool] = []
    if benchmark.domain == "math":  # maj@k needs answer equivalence; programs have none
        cluster_of, cluster_correct = vote_clusters(answers, sample_correct)
    steps = []
    for vote in ttrl.votes:
        kept = [correct(a) for a in vote.answers]
        steps.append(
            TTRLStepAudit(
                step=vote.step,
                label_correct=correct(vote.label),
                reward_accuracy=_reward_accuracy(vote.rewards, kept),
                ground_truth_ratio=mean(kept) if kept else 0.0,
                any_correct=any(kept),
            )
        )
    return TTRLAudit(
        before_sample_correct=tuple(sample_correct),
        before_cluster_of=tuple(cluster_of),
        before_cluster_correct=tuple(cluster_correct),
        greedy_before=correct(ttrl.before.greedy) if ttrl.before.greedy is not None else None,
        greedy_after=correct(ttrl.greedy_after) if ttrl.greedy_after is not None else None,
        steps=tuple(steps),
    )


def _reward_accuracy(rewards: Sequence[float], kept: Sequence[bool]) -> float | None:
    """The share of kept samples whose reward equals their correctness: for 0/1 rewards only (a novelty or a
    confidence reward is never equal to 0 or 1 by design, so the share would measure nothing)."""
    if not kept:
        return 0.0
    if any(float(r) not in (0.0, 1.0) for r in rewards):
        return None
    return mean(float(r) == float(c) for r, c in zip(rewards, kept, strict=True))


def summarize_ttrl(records: Sequence[ResultRecord], seed: int = 0) -> TTRLSummary | None:
    audited = [(r, r.ttrl_audit) for r in records if r.ttrl_audit and r.sample_correct]
    if not audited:
        return None
    before = [mean(a.before_sample_correct or (0.0,)) for _, a in audited]
    after = [mean(r.sample_correct) for r, _ in audited]
    summary: dict[str, Any] = {
        "pass@1_before": mean_ci(before, seed),
        "pass@1_after": mean_ci(after, seed),
        "pass@1_gain": paired_difference_ci(after, before, seed),  # paired by problem
    }
    n_before = min(len(a.before_cluster_of) for _, a in audited)
    if n_before:
        summary["maj@k_before"] = {
            str(k): mean(maj_at_k(a.before_cluster_of, a.before_cluster_correct, k, seed) for _, a in audited)
            for k in powers_of_two_upto(n_before)
        }
    greedy = {key: [getattr(a, key) for _, a in audited] for key in ("greedy_before", "greedy_after")}
    for key, values in greedy.items():
        if all(v is not None for v in values):
            summary[key] = mean(values)
    if "greedy_before" in summary:  # the base's greedy answer: what sharpening alone would give
        base_greedy = [float(v) for v in greedy["greedy_before"]]
        summary["pass@1_after_vs_greedy_before"] = paired_difference_ci(after, base_greedy, seed)
        if "greedy_after" in summary:
            summary["greedy_gain"] = paired_difference_ci([float(v) for v in greedy["greedy_after"]], base_greedy, seed)
    by_step: dict[int, list[TTRLStepAudit]] = defaultdict(list)
    for _, a in audited:
        for s in a.steps:
            by_step[s.step].append(s)
    steps = sorted(by_step)
    summary["per_step"] = {
        "step": steps,
        **{
            key: [mean(getattr(s, key) for s in by_step[t]) for t in steps]
            for key in ("label_correct", "ground_truth_ratio")
        },
        "train_pass@k": [mean(s.any_correct for s in by_step[t]) for t in steps],
    }
    if all(s.reward_accuracy is not None for t in steps for s in by_step[t]):  # else rewards are not 0/1: none
        summary["per_step"]["reward_accuracy"] = [mean(s.reward_accuracy or 0.0 for s in by_step[t]) for t in steps]
    extinct_by_step: dict[int, list[bool]] = defaultdict(list)
    windows: list[int] = []
    extinct_last = []
    for _, a in audited:
        visits = sorted(a.steps, key=lambda s: s.step)
        extinct = extinctions(visits)
        for visit, gone in zip(visits, extinct, strict=True):
            extinct_by_step[visit.step].append(gone)
        if visits:
            extinct_last.append(extinct[-1])
        wrong = went_wrong(visits)
        first_extinct = next((v.step for v, gone in zip(visits, extinct, strict=True) if gone), None)
        if wrong is not None and first_extinct is not None:
            windows.append(first_extinct - wrong)
    summary["per_step"]["extinction"] = [mean(extinct_by_step[t]) for t in steps]
    summary["health"] = {
        "extinct_at_last_visit": mean(extinct_last) if extinct_last else 0.0,
        "labels_went_wrong": sum(went_wrong(sorted(a.steps, key=lambda s: s.step)) is not None for _, a in audited),
        "wrong_to_extinct_steps": sorted(windows),
    }
    return TTRLSummary.model_validate(summary)


def extinctions(visits: Sequence[TTRLStepAudit]) -> list[bool]:
    """Per visit: the samples held the correct answer at an earlier visit and hold it no more."""
    seen, extinct = False, []
    for visit in visits:
        extinct.append(seen and not visit.any_correct)
        seen = seen or visit.any_correct
    return extinct


def went_wrong(visits: Sequence[TTRLStepAudit]) -> int | None:
    """The step at which a label that had been right was first wrong; None if it never was right, then wrong."""
    right = False
    for visit in visits:
        if visit.label_correct:
            right = True
        elif right:
            return visit.step
    return None
