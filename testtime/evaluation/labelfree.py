"""What a run says without labels: each problem's prediction with a label-free confidence (`predictions.jsonl`,
ready to hand on), and the run's label-free quantities for the summary — answer rate, confidence, vote share
and margin, TRT's support and refutations, execution agreement on code, TTRL's majority-ratio trajectory.

Confidence (0–1) is the share of the method's own evidence behind its answer: for a selection, the selected
class's share (majority: samples in the winning class of all samples, abstains included; TRT: the answer's
support among all answers concluded over the rounds; code: candidates that behave like the chosen program;
free-form text: the chosen reply's judged class's share, by medoid or usc, or with `agreement=words` its mean
word-overlap similarity to the other samples);
for TTRL, the share of the trained model's evaluation samples that agree with its greedy answer. One sample
(`single`) carries no such evidence: its confidence is null, not 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import mean, quantiles
from typing import Any

from pydantic import BaseModel, ConfigDict

from testtime.core.answers import equivalent
from testtime.core.records import Candidate
from testtime.core.results import ProblemResult, ResultRecord, RoundRecord, TTRLStep
from testtime.core.selection import ConsistencyEvidence, ExclusivityEvidence, SimilarityEvidence
from testtime.evaluation.summary import Distribution, LabelFreeSummary


class Prediction(BaseModel):
    """One line of `predictions.jsonl`: the answer to hand on, and how sure the method was, without labels."""

    model_config = ConfigDict(extra="forbid")

    id: str
    prediction: str | None  # the final answer (math, choice), program (code) or reply (text); None: none given
    confidence: float | None  # 0–1, label-free; None where the method has no evidence (one sample)
    method: str
    samples: int  # the candidates the answer was chosen among (last round's, for TRT and RSA)
    round: int | None = None  # TRT / RSA: the round or step the answer comes from
    step: int | None = None  # TTRL: the optimiser step of the weights that answered
    selector: str | None = None  # the rule that chose it
    # what `confidence` measured: vote share | judged classes | word overlap | rollouts over rounds | behaviour
    # agreement | trained samples; null with it, and in predictions written before it was said
    confidence_basis: str | None = None
    error: str | None = None  # every sample failed: why
    logprob_mean: float | None = None  # --logprobs: the answer's samples' mean token log-prob; null: not asked


def confidence(result: ProblemResult) -> float | None:
    if result.ttrl is not None:
        answered = [c for c in result.candidates if c.answer is not None]
        if result.prediction is None or not result.candidates:
            return None
        return sum(equivalent(c.answer, result.prediction) for c in answered) / len(result.candidates)
    if result.selection is None or result.prediction is None:
        return None
    if isinstance(result.selection.evidence, (SimilarityEvidence, ConsistencyEvidence)):
        return result.selection.evidence.confidence
    if result.rounds and result.selection.rule == "exclusivity(latest)":
        return support_over_rounds(result.rounds, result.prediction)
    return result.selection.majority_ratio


def confidence_basis(result: ProblemResult) -> str:
    """What `confidence(result)` measured, where it measured something, in words a reader of predictions.jsonl
    can act on."""
    if result.ttrl is not None:
        return "trained samples"
    assert result.selection is not None  # a confidence needs one, TTRL's aside
    evidence = result.selection.evidence
    if isinstance(evidence, (SimilarityEvidence, ConsistencyEvidence)):
        return "judged classes" if evidence.agreement == "judge" else "word overlap"
    if result.rounds and result.selection.rule == "exclusivity(latest)":
        return "rollouts over rounds"
    return "behaviour agreement" if result.selection.selector == "execution" else "vote share"


def support_over_rounds(rounds: Sequence[RoundRecord], prediction: str) -> float | None:
    """TRT's confidence where its selection keeps no history (the released `latest` rule weighs only the round
    at hand: one rollout a round would always give 1.0): the share of every round's rollouts whose answer agrees
    with the final one, those that concluded nothing counted (as majority's vote share counts abstentions: one
    answer among four rollouts is 0.25, not 1.0)."""
    rollouts = [c.answer for r in rounds for c in r.candidates]
    return sum(a is not None and equivalent(a, prediction) for a in rollouts) / len(rollouts) if rollouts else None


def prediction_of(
    result: ProblemResult, method: str, graded_answer: str | None, trained_steps: int | None = None
) -> Prediction:
    """`trained_steps`: TTRL's last optimiser step, the weights every answer came from."""
    failed = [c.error for c in result.candidates if c.error]
    sure = confidence(result)
    return Prediction(
        id=result.problem_id,
        prediction=graded_answer if graded_answer is not None else result.prediction,
        confidence=sure,
        confidence_basis=None if sure is None else confidence_basis(result),
        method=method,
        samples=len(result.candidates),
        round=max((r.round for r in result.rounds), default=None),
        step=_trained(result, trained_steps),
        selector=result.selection.rule if result.selection else None,
        error=failed[0] if failed and len(failed) == len(result.candidates) else None,
        logprob_mean=answer_logprob(result),
    )


def _trained(result: ProblemResult, trained_steps: int | None) -> int | None:
    """The optimiser steps behind the answer: a stream's state at the arrival, else the run's last step."""
    if result.answered_with is not None:
        return result.answered_with.state if result.answered_with.kind == "weights" else None
    return trained_steps if result.ttrl is not None else None


def answer_logprob(result: ProblemResult) -> float | None:
    """The mean token log-probability of the samples that gave the answer (its class; TTRL: the samples
    equivalent to it), a second label-free confidence where the run asked for log-probs; None otherwise."""
    if result.prediction is None:
        return None
    selection, answer = result.selection, result.prediction

    def gave_it(candidate: Candidate) -> bool:
        if selection is not None:
            return selection.in_selected_class(candidate.index)
        return candidate.answer is not None and equivalent(candidate.answer, answer)

    stats = [c.token_stats for c in result.candidates if c.token_stats is not None and gave_it(c)]
    values = [s.logprob_mean for s in stats if s.logprob_mean is not None]
    return mean(values) if values else None


def distribution(values: Sequence[float]) -> Distribution | None:
    if not values:
        return None
    if len(values) == 1:
        q1 = median = q3 = values[0]
    else:
        q1, median, q3 = quantiles(values, n=4, method="inclusive")
    return Distribution(n=len(values), mean=mean(values), q1=q1, median=median, q3=q3)


def label_free(records: Sequence[ResultRecord], steps: Sequence[TTRLStep] = ()) -> LabelFreeSummary:
    selected = [r.selection for r in records if r.selection is not None and r.prediction is not None]
    values: dict[str, Any] = {
        "answer_rate": mean(r.prediction is not None for r in records) if records else None,
        "confidence": distribution([c for r in records if (c := confidence(r)) is not None]),
        "vote_share": distribution([s.majority_ratio for s in selected]),
        "margin": distribution([s.margin for s in selected]),
    }
    trt = [
        (r.prediction, r.selection.evidence)
        for r in records
        if r.selection is not None and isinstance(r.selection.evidence, ExclusivityEvidence)
    ]
    if trt:
        values["support"] = distribution([_net(answer, evidence) for answer, evidence in trt if answer is not None])
        values["refuted_share"] = mean(bool(_lookup(evidence.refuted, answer)) for answer, evidence in trt)
    code = [r for r in records if r.selection is not None and r.selection.selector == "execution"]
    if code:
        values["execution_agreement"] = distribution([r.selection.majority_ratio for r in code if r.selection])
    if steps:
        values["ttrl_majority_ratio"] = [s.majority_ratio for s in steps if s.majority_ratio is not None]
    judged = [usable for r in records if (usable := _judgement(r)) is not None]
    if judged:
        values["judged"], values["judge_fell_back"] = len(judged), judged.count(False)
        # USC's half-failures: the judge chose the reply, only its grouping (the confidence's classes) fell back
        values["judge_grouping_fell_back"] = sum(_pick_held_grouping_fell_back(r) for r in records)
    return LabelFreeSummary.model_validate(values)


def _pick_held_grouping_fell_back(record: ResultRecord) -> bool:
    evidence = record.selection.evidence if record.selection is not None else None
    return (
        isinstance(evidence, ConsistencyEvidence)
        and evidence.judgement_usable is False
        and evidence.picked is not None
        and evidence.agreement == "words"
    )


def _judgement(record: ResultRecord) -> bool | None:
    """Whether the model's judgement behind a free-form selection was usable; None where none was asked."""
    evidence = record.selection.evidence if record.selection is not None else None
    if isinstance(evidence, (SimilarityEvidence, ConsistencyEvidence)):
        return evidence.judgement_usable
    return None


def _lookup(counts: dict[str, int], answer: str | None) -> int:
    if answer is None:
        return 0
    return next((n for key, n in counts.items() if equivalent(key, answer)), 0)


def _net(answer: str, evidence: ExclusivityEvidence) -> float:
    """The answer's net support over the rounds (rollouts concluding it minus those refuting it), as a share
    of every conclusion reached."""
    total = sum(evidence.support.values())
    return (_lookup(evidence.support, answer) - _lookup(evidence.refuted, answer)) / total if total else 0.0
