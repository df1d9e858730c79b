"""TTRL on the compute frontier: what its after-training answer cost in tokens, and the base model's majority
at that same budget.

TTRL's cost per problem = its training rollouts and extra votes (prompt + completion tokens), the tokens the
optimiser trained on (each rollout token processed again, forward and backward), and the one greedy answer
after training that the run's accuracy grades; FLOPs stand beside (the trainer's estimate). Dividing by the
base model's tokens per answer gives k, the number of base samples the same tokens buy: maj@k from the base
evaluation's own samples is the label-free baseline at equal compute (capped at the samples there are, and
then said so). Evaluation before training is measurement, not method: it is not counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from statistics import mean
from typing import Any

from testtime.core.ledger import LedgerEntry
from testtime.core.results import ResultRecord
from testtime.evaluation.metrics import maj_at_k
from testtime.evaluation.summary import TTRLCompute

TRAINING_CALLS: tuple[str, ...] = ("ttrl_rollout", "ttrl_vote")
ANSWER_CALLS: tuple[str, ...] = ("eval_after_greedy",)
BASE_ANSWER_CALLS: tuple[str, ...] = ("eval_before",)


def _tokens(entries: Iterable[LedgerEntry], purposes: Sequence[str]) -> list[int]:
    return [
        e.prompt_tokens + e.completion_tokens
        for e in entries
        if e.kind == "model_call" and not e.cached and e.purpose in purposes
    ]


def ttrl_compute(entries: Sequence[LedgerEntry], records: Sequence[ResultRecord], seed: int = 0) -> TTRLCompute:
    problems = max(len(records), 1)
    rollout_tokens = sum(_tokens(entries, TRAINING_CALLS))
    train = [e for e in entries if e.kind == "train_step"]
    train_tokens = sum(e.train_tokens for e in train)
    answers = _tokens(entries, ANSWER_CALLS)
    base = _tokens(entries, BASE_ANSWER_CALLS)
    per_problem = (rollout_tokens + train_tokens + sum(answers)) / problems
    compute: dict[str, Any] = {
        "rollout_tokens": rollout_tokens,
        "train_tokens": train_tokens,
        "train_flops": sum(e.flops or 0.0 for e in train),
        "tokens_per_problem": per_problem,
    }
    audits = [r.ttrl_audit for r in records if r.ttrl_audit and r.ttrl_audit.before_cluster_of]
    if not base or not audits:
        return TTRLCompute.model_validate(compute)  # code: no answer classes, so no majority to set beside it
    per_answer = mean(base)
    k = max(1, round(per_problem / per_answer))
    n = min(len(a.before_cluster_of) for a in audits)
    measured = min(k, n)
    compute["base_tokens_per_answer"] = per_answer
    compute["same_tokens_k"] = k
    compute["base_majority_at_same_tokens"] = {
        "k": measured,
        "capped": measured < k,  # the base evaluation has fewer samples than the budget buys
        "accuracy": mean(maj_at_k(a.before_cluster_of, a.before_cluster_correct, measured, seed) for a in audits),
    }
    return TTRLCompute.model_validate(compute)
