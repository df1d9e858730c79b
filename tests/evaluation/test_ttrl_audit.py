"""TTRL's audit-side health signals, from sealed labels outside the method: pass@k of the training samples,
correct-answer extinction, and how long after a label went wrong its correct answer vanished; and TTRL's
place on the compute frontier."""

from __future__ import annotations

from testtime.core.ledger import LedgerEntry
from testtime.core.results import ResultRecord, TTRLAudit, TTRLStepAudit
from testtime.evaluation.ttrl_audit import extinctions, summarize_ttrl, went_wrong
from testtime.evaluation.ttrl_compute import ttrl_compute


def _visits(*pairs: tuple[bool, bool]) -> tuple[TTRLStepAudit, ...]:
    """(label correct, some kept sample correct) per visit, one visit every 4 steps."""
    return tuple(
        TTRLStepAudit(
            step=4 * i + 1, label_correct=label, reward_accuracy=1.0, ground_truth_ratio=0.5, any_correct=any_ok
        )
        for i, (label, any_ok) in enumerate(pairs)
    )


def _record(pid: str, visits: tuple[TTRLStepAudit, ...]) -> ResultRecord:
    return ResultRecord(
        problem_id=pid,
        prediction="1",
        correct=True,
        graded_answer="1",
        status="correct",
        sample_correct=(True, False),
        ttrl_audit=TTRLAudit(before_sample_correct=(False, False), steps=visits),
    )


def test_extinction_needs_the_correct_answer_seen_before() -> None:
    never = _visits((False, False), (False, False))
    lost = _visits((True, True), (False, True), (False, False), (False, False))
    assert extinctions(never) == [False, False]  # never sampled is not extinct: it never lived
    assert extinctions(lost) == [False, False, True, True]


def test_a_label_went_wrong_only_after_being_right() -> None:
    assert went_wrong(_visits((False, True), (False, True))) is None
    assert went_wrong(_visits((True, True), (True, True), (False, True))) == 9
    assert went_wrong(_visits((True, True), (True, True))) is None


def test_summary_reports_pass_at_k_extinction_and_the_window() -> None:
    records = [
        # right, then wrong at step 5 while still sampled, then extinct at step 13: an 8-step window
        _record("a", _visits((True, True), (False, True), (False, True), (False, False))),
        _record("b", _visits((True, True), (True, True), (True, True), (True, True))),  # healthy
    ]
    summary = summarize_ttrl(records)
    assert summary is not None and summary.health is not None
    per_step = summary.model_dump()["per_step"]  # the names summary.json holds
    assert per_step["step"] == [1, 5, 9, 13]
    assert per_step["train_pass@k"] == [1.0, 1.0, 1.0, 0.5]
    assert per_step["extinction"] == [0.0, 0.0, 0.0, 0.5]
    assert summary.health.model_dump() == {
        "extinct_at_last_visit": 0.5,
        "labels_went_wrong": 1,
        "wrong_to_extinct_steps": [8],
    }


def _entry(purpose: str, tokens: int, **extra: object) -> LedgerEntry:
    return LedgerEntry(purpose=purpose, prompt_tokens=tokens // 2, completion_tokens=tokens - tokens // 2, **extra)


def test_ttrl_is_placed_at_its_tokens_beside_the_base_majority_there() -> None:
    records = [
        ResultRecord(
            problem_id=f"p{i}",
            prediction="1",
            correct=True,
            graded_answer="1",
            status="correct",
            # base samples: classes 0,0,1,1 (class 0 right on p0, class 1 right on p1)
            ttrl_audit=TTRLAudit(before_cluster_of=(0, 0, 1, 1), before_cluster_correct=(i == 0, i == 1)),
        )
        for i in range(2)
    ]
    entries = [_entry("eval_before", 100) for _ in range(8)]  # 100 tokens per base answer
    entries += [_entry("ttrl_rollout", 100) for _ in range(2)] + [_entry("ttrl_vote", 100)]
    entries += [LedgerEntry(kind="train_step", train_tokens=200, flops=1e9), _entry("eval_after_greedy", 100)]
    entries += [_entry("eval_after", 100) for _ in range(8)]  # measurement: not TTRL's cost
    entries += [LedgerEntry(purpose="ttrl_rollout", prompt_tokens=999, cached=True)]  # a cache hit costs nothing
    compute = ttrl_compute(entries, records).model_dump()
    assert compute["rollout_tokens"] == 300 and compute["train_tokens"] == 200
    assert compute["tokens_per_problem"] == 300  # (300 + 200 + 100) / 2 problems
    assert compute["same_tokens_k"] == 3 and compute["base_tokens_per_answer"] == 100
    assert compute["base_majority_at_same_tokens"]["k"] == 3
    assert not compute["base_majority_at_same_tokens"]["capped"]
    richer = ttrl_compute([*entries, LedgerEntry(kind="train_step", train_tokens=1200)], records).model_dump()
    assert richer["same_tokens_k"] == 9 and richer["base_majority_at_same_tokens"] == {
        "k": 4,
        "capped": True,  # 9 answers' worth of tokens, 4 base samples to vote with: said, not hidden
        "accuracy": 0.5,
    }


def test_the_trained_model_is_set_beside_the_bases_greedy_answer() -> None:
    """Sampled pass@1 after training against the base's greedy answer, paired by problem: a gain over the base's
    own samples that greedy decoding already had is no gain over greedy (the reviewer's question)."""

    def record(pid: str, after: tuple[bool, ...], greedy_before: bool, greedy_after: bool) -> ResultRecord:
        audit = TTRLAudit(
            before_sample_correct=(False, False, False, False),
            greedy_before=greedy_before,
            greedy_after=greedy_after,
            steps=_visits((True, True)),
        )
        return ResultRecord(
            problem_id=pid, prediction="1", correct=True, graded_answer="1", status="correct",
            sample_correct=after, ttrl_audit=audit,
        )  # fmt: skip

    records = [
        record("a", (True, True, False, False), greedy_before=True, greedy_after=True),
        record("b", (True, False, False, False), greedy_before=False, greedy_after=True),
        record("c", (False, False, False, False), greedy_before=True, greedy_after=False),
    ]
    summary = summarize_ttrl(records)
    assert summary is not None and summary.pass_at_1_after_vs_greedy_before is not None
    assert summary.pass_at_1_gain.mean == 0.25  # against the base's samples: a gain
    # against its greedy answers (1, 0, 1): (0.5 - 1 + 0.25 - 0 + 0 - 1) / 3 = -0.417, no gain at all
    assert round(summary.pass_at_1_after_vs_greedy_before.mean, 3) == -0.417
    assert summary.greedy_gain is not None and summary.greedy_gain.mean == 0.0
    dumped = summary.model_dump(by_alias=True)
    assert "pass@1_after_vs_greedy_before" in dumped and dumped["greedy_gain"]["interval"] == "paired_bootstrap"


def test_reward_accuracy_is_reported_for_zero_one_rewards_only() -> None:
    from testtime.core.records import Reference
    from testtime.core.results import TTRLEvaluation, TTRLRecord, TTRLVote
    from testtime.evaluation.ttrl_audit import audit_ttrl

    class Exact:
        domain = "math"

        def grade(self, answer: str, reference: Reference):  # type: ignore[no-untyped-def]
            from testtime.benchmarks.base import Grade

            return Grade(correct=answer == reference.answer, answer=answer, status="graded")

    def steps(rewards: tuple[float, ...]) -> tuple[TTRLStepAudit, ...]:
        vote = TTRLVote(problem_id="p", step=1, label="4", majority_ratio=0.5, answers=("4", "5"), rewards=rewards)
        ttrl = TTRLRecord(before=TTRLEvaluation(answers=("4",)), votes=(vote,))
        return audit_ttrl(Exact(), ttrl, Reference(problem_id="p", answer="4")).steps  # type: ignore[arg-type]

    assert steps((1.0, 0.0))[0].reward_accuracy == 1.0  # majority: each reward is the sample's correctness
    assert steps((0.9, -0.6))[0].reward_accuracy is None  # novelty's graded rewards: equality would mean nothing
