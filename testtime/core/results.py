"""The records a run writes per problem: what a method produced, what its rounds or steps were, and how the
scorer graded it. Methods produce `ProblemResult`; the scorer adds `Grading`; results.jsonl holds one
`ResultRecord` (both, flat) per line. Scorer, audit, curves, report and the viewer read these types, never
a method's module, and never a string key into a free-form dict.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from testtime.core.adaptive import AdaptiveStop
from testtime.core.jsonl import read_records
from testtime.core.records import Candidate, Record, Text, TokenStats
from testtime.core.selection import Selection


class Strategy(Record):
    key_technique: str
    what_to_try: str


class Lesson(Record):
    """One knowledge item as it stood when a round ended."""

    id: int
    text: str
    kind: Literal["dont", "do"] = "dont"
    round: int = 0
    source: str = "reflection"  # reflection | refutation
    rejected_answer: str | None = None
    active: bool = True


class Rejection(Record):
    answer: str
    reason: str
    round: int


class RoundCandidate(Record):
    index: int
    answer: str | None
    error: str | None = None
    tokens: int = 0
    strategy: str | None = None  # the strategy the rollout was given (TRT)


class RoundRecord(Record):
    """One finished round (TRT) or aggregation step (RSA)."""

    round: int
    selected_answer: str | None
    candidates: tuple[RoundCandidate, ...] = ()
    selection: Selection | None = None
    order: tuple[int, ...] = ()  # the seeded order candidates were shown to the selector in
    knowledge: tuple[Lesson, ...] = ()  # active items after the round's reflection
    knowledge_tokens: int = 0
    refutations: tuple[Rejection, ...] = ()  # math: every refutation so far, with its reason
    rejected: tuple[str, ...] = ()  # math: the answers whose refutations outweigh their support now
    strategies: tuple[Strategy, ...] = ()  # the strategies the next round will use
    reflection_parsed: bool | None = None
    # TRT's knowledge health: whether the first strategy list parsed (round 1 only; None: not asked), and how many
    # lessons entered the knowledge list this round (None: no knowledge list, or a run made before this was kept)
    strategies_parsed: bool | None = None
    lessons_added: int | None = None


class TTRLVote(Record):
    """One prompt's vote in one training step, from the selector to `steps.jsonl`: the selected class (the
    pseudo-label), the kept samples' answers and the rewards trained on. The fields marked `exclude` serve
    the reward step and the trainer and never reach the file (every vote's answer, the abstainers, sandbox
    time)."""

    step: int = 0
    problem_id: str
    label: str | None = None  # a raw member of the selected class (an answer, or a program); None: skipped
    label_key: str | None = None  # its canonical key, for flip tracking
    majority_ratio: float  # selected class size / N_vote, abstains included
    margin: float = 0.0
    tie: bool = False
    skipped: str | None = None  # "all_abstain" | "below_min_ratio" | None
    kept: tuple[int, ...] = ()  # the trained samples' places among the votes, in training order
    answers: tuple[str | None, ...] = ()  # the kept samples' answers or programs, in training order
    rewards: tuple[float, ...] = ()  # what was trained on (the majority reward, or a control's)
    majority_rewards: tuple[float, ...] | None = None  # a control run: what the vote would have given
    flipped: bool | None = None  # the label changed since this prompt's last vote (None: first vote)
    classes: int = 0  # distinct answer classes or behaviours among the votes
    no_answer_rate: float = 0.0  # no answer, no code, or code that does not compile
    # label=reflect: the majority's answer beside the reflective label, whether they differ, whether the
    # reflection named no class (the majority is then the label); None where the label is the majority's
    majority_label: str | None = None
    label_differs: bool | None = None
    label_fell_back: bool | None = None
    votes: tuple[str | None, ...] = Field(default=(), exclude=True)  # every voted sample's answer or program
    abstained: frozenset[int] = Field(default=frozenset(), exclude=True)  # votes that joined no class
    sandbox_seconds: float = Field(default=0.0, exclude=True)
    texts: tuple[str, ...] = Field(default=(), exclude=True)  # every vote's text (the novelty reward scores all)
    vote_rewards: tuple[float, ...] = Field(default=(), exclude=True)  # every vote's agreement reward
    scores: tuple[float, ...] = Field(default=(), exclude=True)  # every vote's score by the selector's ranking
    token_stats: tuple[TokenStats, ...] = Field(default=(), exclude=True)  # kept samples' (confidence rewards)


class TTRLKnowledge(Record):
    """knowledge=trt: one rollout step's TRT reflections (`methods/ttrl/knowledge.py`)."""

    asked: int = 0  # prompts whose vote rejected a class: one reflection each
    parsed: int = 0  # reflections whose JSON parsed
    entered: int = 0  # lessons that entered a prompt's list


class TTRLStep(Record):
    """One optimiser step in `ttrl/steps.jsonl`: the trainer's metrics, the label-free vote metrics, and (on
    the first optimiser step of each rollout step) every prompt's vote."""

    step: int
    seconds: float = 0.0
    loss: float | None = None
    grad_norm: float | None = None
    learning_rate: float | None = None
    entropy: float | None = None
    reward: float | None = None
    reward_std: float | None = None
    frac_reward_zero_std: float | None = None
    mean_length: float | None = None
    truncation_rate: float | None = None
    kl: float | None = None
    majority_ratio: float | None = None
    vote_margin: float | None = None
    no_answer_rate: float | None = None
    skipped_prompts: float | None = None
    tie_rate: float | None = None
    pseudo_reward: float | None = None  # the vote's mean reward (label-free), whatever was trained on
    train_reward: float | None = None  # the mean reward trained on (differs from pseudo_reward in controls)
    label_flip_rate: float | None = None
    distinct_classes: float | None = None
    collapse_alarm: str | None = None
    knowledge: TTRLKnowledge | None = None  # knowledge=trt, on a rollout step's first line; None otherwise
    votes: tuple[TTRLVote, ...] = ()


class TTRLEvaluation(Record):
    answers: tuple[str | None, ...] = ()
    greedy: str | None = None


class TTRLRecord(Record):
    before: TTRLEvaluation = TTRLEvaluation()
    greedy_after: str | None = None
    votes: tuple[TTRLVote, ...] = ()
    test_inputs: tuple[str, ...] = ()  # code: the inputs the base model wrote, run every step


class AnsweredWith(Record):
    """A stream's problem: the state that answered it, as it stood at the problem's arrival, before anything
    could be learned from the problem (`run/stream.py`)."""

    arrival: int  # its place in the stream, from 0
    state: int  # TTRL: optimiser steps taken so far; shared memory: its version; no adaptation: 0
    kind: Literal["none", "memory", "weights"] = "none"
    memory: tuple[int, ...] = ()  # shared memory: the ids of the items its prompts carried


class GateSignals(Record):
    """One set of weights on a learning endpoint's probe (`methods/ttrl/gate.py`)."""

    questions: int
    samples: int
    answer_rate: float  # samples with an answer / samples
    distinct_answers: int  # distinct winning answers across the questions that have one
    answered_questions: int  # questions whose vote has a winning answer
    vote_share: float | None  # mean share of the winning class over the questions that have one (None: none has)
    loop_rate: float | None = None  # samples that loop (gate.py's compression check) / samples; None: older runs


class GateVerdict(Record):
    """The gate before a swap: both sets of weights' figures, the margin, and the verdict. `answer_rate_margin` is
    the margin of every share the gate weighs (the answer rate's and the loop rate's)."""

    serving: GateSignals
    trained: GateSignals
    accepted: bool
    why: str | None = None  # why it was refused
    answer_rate_margin: float
    # how many standard errors the trained weights' answer rate fell (pooled two-proportion z), and the z that
    # refuses; None in runs from before the gate weighed noise
    answer_rate_z: float | None = None
    loop_rate_z: float | None = None  # the same for the rise in samples that loop
    noise_z: float | None = None


class StreamUpdate(Record):
    """One change of a stream's state (`stream/updates.jsonl`): the state it made, from which arrivals."""

    state: int  # the state after it (what `AnsweredWith.state` names)
    arrivals: int  # arrivals answered when it was made (every one of them answered before it)
    learned_from: tuple[str, ...]  # the problems it learned from (a TTRL window with its replay; one problem)
    seconds: float = 0.0
    added: tuple[int, ...] = ()  # shared memory: the items it added
    # a learning endpoint's update (`methods/ttrl/background.py`); None in streams and older served runs
    outcome: Literal["accepted", "refused", "skipped", "failed"] | None = None  # None: made and swapped in
    weights: str | None = None  # the name its trained weights got (MODEL+ttrl@STEPS), accepted or not
    trained_steps: int | None = None  # optimiser steps the endpoint had taken by then, refused updates' included
    gate: GateVerdict | None = None  # the gate's figures (None: no gate ran)
    why: str | None = None  # why it was refused, skipped or failed


class ProblemResult(Record):
    """A method's answer to one problem, ungraded: the prediction, the candidates it chose among, how it
    chose (`selection`), and its rounds (TRT, RSA) or training record (TTRL)."""

    problem_id: str
    prediction: str | None
    candidates: list[Candidate] = Field(default_factory=list)
    selection: Selection | None = None
    rounds: tuple[RoundRecord, ...] = ()
    ttrl: TTRLRecord | None = None
    answered_with: AnsweredWith | None = None  # a stream's problem: the state that answered it; else None
    adaptive: AdaptiveStop | None = None  # --adaptive: the samples its vote drew and why it stopped; else None

    def ungraded(self) -> ProblemResult:
        """What a method may see of an answered problem: exactly a `ProblemResult`, never a subclass that carries
        its grade (a `ResultRecord` read back from results.jsonl)."""
        if type(self) is ProblemResult:
            return self
        return ProblemResult.model_validate({name: getattr(self, name) for name in ProblemResult.model_fields})


class RoundAudit(Record):
    accuracy: tuple[bool, ...]  # the round's selected answer was correct
    coverage: tuple[bool, ...]  # some rollout so far was correct (oracle coverage, not accuracy)
    rollout_mean: tuple[float, ...]  # mean accuracy of the round's rollouts (RSA's population metric)


class TTRLStepAudit(Record):
    step: int
    label_correct: bool
    reward_accuracy: float | None  # rewards equal to correctness; None where rewards are not 0/1 (it means nothing)
    ground_truth_ratio: float
    any_correct: bool = False  # some kept sample is correct (pass@k of the training samples)


class TTRLAudit(Record):
    before_sample_correct: tuple[bool, ...] = ()
    before_cluster_of: tuple[int, ...] = ()
    before_cluster_correct: tuple[bool, ...] = ()
    greedy_before: bool | None = None
    greedy_after: bool | None = None
    steps: tuple[TTRLStepAudit, ...] = ()


class Grading(Record):
    """The scorer's verdict on one result, from the sealed reference. A problem without a label (a user's
    unlabelled row) is not graded: `correct` is None and `status` "unlabelled" (or what no answer was)."""

    correct: bool | None
    graded_answer: str | None
    status: str
    # What was graded against, written once grading is done (methods never read results): the reference
    # answer (math), the number of hidden tests (code); None when unlabelled or graded by an older version.
    reference: str | None = None
    hidden_tests: int | None = None
    sample_correct: tuple[bool, ...] = ()
    sample_status: tuple[str, ...] = ()
    public_only: bool = False
    erratum: str | None = None
    round_audit: RoundAudit | None = None
    ttrl_audit: TTRLAudit | None = None
    cluster_of: tuple[int, ...] | None = None  # maj@k inputs: each sample's class (-1: no answer)
    cluster_correct: tuple[bool, ...] | None = None


class ResultRecord(ProblemResult, Grading):
    """One line of results.jsonl."""

    @property
    def labelled(self) -> bool:
        return self.correct is not None

    @classmethod
    def of(cls, result: ProblemResult, grading: Grading) -> ResultRecord:
        return cls.model_validate({**result.model_dump(), **grading.model_dump()})


class LaterGrade(Record):
    """One line of a served run's `graded.jsonl` (`testtime grade --run`): a request graded once its label was
    known, by the labelled problem it asked. `results.jsonl` keeps the request as it was answered, unlabelled."""

    id: Text  # the request: its problem id in results.jsonl
    problem: Text  # the labelled problem it asked (the benchmark's id): runs served the same questions pair on it
    bench: Text  # the benchmark (or file) the label came from
    grading: Grading


def read_steps(path: Path) -> list[TTRLStep]:
    """The records of a TTRL `steps.jsonl` (none if absent); a line torn by a kill is skipped."""
    records = []
    if path.exists():
        for line in read_records(path):
            try:
                records.append(TTRLStep.model_validate(json.loads(line)))
            except (ValueError, ValidationError):
                continue
    return records
