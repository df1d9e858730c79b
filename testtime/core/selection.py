"""What a selector decides and why: the `Selection` record and the typed evidence of each selector.

One record for every selector (majority vote, mutual exclusivity, execution, the free-form medoid and universal
self-consistency), so TRT's round selection, the baselines' pick and TTRL's reward read the same fields: the
chosen candidate, each candidate's class (answer class, behaviour class, identical replies; None = abstained: no
answer, no code, a compile error) and score, the selected class, tie and margin, the sandbox seconds spent, and
the selector's own evidence.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from testtime.core.records import Record


class CandidateScore(Record):
    """One candidate's place in a selection: its class (None: it gave no answer) and the selector's score."""

    index: int  # the candidate's index
    cluster: int | None  # its class in this selection; None = abstained
    score: float = 0.0  # the selector's own score (votes, support, agreement weight)


class VoteEvidence(Record):
    kind: Literal["vote"] = "vote"
    clusters: tuple[tuple[int, ...], ...] = ()  # candidate indices per answer class, largest first
    reason: str | None = None


class ExclusivityEvidence(Record):
    kind: Literal["exclusivity"] = "exclusivity"
    rejected: tuple[str, ...] = ()  # answers whose refutations outweigh their support
    excluded: tuple[str, ...] = ()  # the same, among the pool (kept for older readers)
    support: dict[str, int] = Field(default_factory=dict)  # answer → rollouts that concluded it
    refuted: dict[str, int] = Field(default_factory=dict)  # answer → rollouts that refuted it
    reason: str | None = None
    kept_incumbent: bool = False


class SuiteStats(Record):
    requested: int = 0
    parsed: int = 0
    duplicates: int = 0
    invalid: int = 0
    non_discriminating: int = 0
    public: int = 0
    generated: int = 0
    kept: int = 0


class ExecutionCandidate(Record):
    index: int
    public_passed: int
    cluster_size: int
    agreement_weight: float  # its behaviour class's size × the share of kept written inputs it ran cleanly on
    predicted_agreement: int
    # public tests plus written tests with expected outputs it passed (rank tests_passed ranks by this); null where
    # no expected output was written (inputs only) or in runs made before it was recorded
    tests_passed: int | None = None


class TestRun(Record):
    __test__ = False  # a record, not a pytest test class

    verdict: str
    error: str | None = None
    output: str = ""


class CandidateRuns(Record):
    index: int
    tests: tuple[TestRun, ...]


class TestMatrix(Record):
    """`rank=matrix`: every distinct program against every test with an expected output, and how they scored each
    other (`selectors/matrix.py`)."""

    __test__ = False  # a record, not a pytest test class
    candidates: tuple[int, ...]  # each row's candidate index (its program's first candidate)
    tests: tuple[str, ...]  # each column: "public N" or "written N" (its place among the generated inputs)
    passes: tuple[tuple[bool, ...], ...]  # rows × columns, judged as the grader judges
    weights: tuple[float, ...]  # each test's weight after the rounds
    scores: tuple[float, ...]  # each row's score


class ExecutionEvidence(Record):
    kind: Literal["execution"] = "execution"
    suite: SuiteStats = SuiteStats()
    empty_suite: bool = False
    tied_candidates: tuple[int, ...] = ()
    candidates: tuple[ExecutionCandidate, ...] = ()
    report: tuple[CandidateRuns, ...] = ()  # per candidate, per test: public examples first, then generated
    generated_inputs: tuple[str, ...] = ()
    reason: str | None = None
    matrix: TestMatrix | None = None  # rank=matrix: the code × test matrix; None otherwise (and in older runs)


class SimilarityEvidence(Record):
    """Free-form replies: how alike each is to the others (`core.answers.freeform.similarity`)."""

    kind: Literal["similarity"] = "similarity"
    measure: str = "mean F1 of normalised word unigrams and bigrams"
    mean_similarity: tuple[float | None, ...] = ()  # per candidate, to every other (abstained: None, and 0 to them)
    # judged classes: the chosen class's share of the candidates; words: the chosen reply's mean similarity to the
    # others; None: alone
    confidence: float | None = None
    reason: str | None = None
    agreement: Literal["judge", "words"] | None = None  # who made the classes (None: written before either)
    # a model was asked to judge: whether its judgement could be used (False: it fell back to word overlap);
    # None where no judgement was asked (agreement=words, one answer, older runs)
    judgement_usable: bool | None = None


class ConsistencyEvidence(Record):
    """Universal self-consistency: which reply the model judged most consistent with the others."""

    kind: Literal["consistency"] = "consistency"
    shown: tuple[int, ...] = ()  # candidate indices, in the order shown
    numbers: tuple[int, ...] = ()  # the response number each was shown as (absent in older runs: 0, 1, ...)
    reply: str = ""  # the model's judgement (its last 2,000 characters)
    picked: int | None = None  # the position in `shown` of the response the judgement named; None: none readable
    fallback: str | None = None  # why the medoid chose instead (an unreadable or failed judgement)
    # The chosen reply's class's share of the candidates (agreement "judge"), or its mean word-overlap similarity
    # to the others ("words"; runs before the evidence pass: always this one, agreement absent); None: alone.
    confidence: float | None = None
    agreement: Literal["judge", "words"] | None = None  # the classes the confidence counts; None: an older run
    reason: str | None = None  # why the classes are identical replies, not judged ones (None: asked for, or judged)
    truncated: int = 0  # replies cut to fit the judge's caps (each reply's and the whole prompt's)
    judgement_usable: bool | None = None  # the pick named a reply and the grouping (if asked) named groups


class ReflectionEvidence(Record):
    """A reflective pseudo-label (`reflect`, SR-TTRL): the model, shown one representative per answer class, named
    the answer it judges right; the majority's answer beside it, and whether the choice fell back to it."""

    kind: Literal["reflection"] = "reflection"
    clusters: tuple[tuple[int, ...], ...] = ()  # candidate indices per answer class, largest first (the vote's)
    shown: tuple[int, ...] = ()  # the representatives' candidate indices, in the order shown
    majority_answer: str | None = None
    reflected_answer: str | None = None  # what the reflection's reply boxed (None: nothing, or no reply)
    differs: bool = False  # the chosen label is not the majority's
    fell_back: bool = False  # the reply named no class: the majority's answer is the label
    reason: str | None = None  # why no reflection was asked, or why it fell back
    reply: str = ""  # the reflection's reply (its last 2,000 characters)


Evidence = Annotated[
    VoteEvidence
    | ExclusivityEvidence
    | ExecutionEvidence
    | SimilarityEvidence
    | ConsistencyEvidence
    | ReflectionEvidence,
    Field(discriminator="kind"),
]


class Selection(Record):
    """What a selector chose and why: enough to audit the choice without rerunning it."""

    selector: str = ""  # the registry name of the selector that decided
    index: int | None  # the chosen candidate (None: nothing to choose, or a kept earlier answer)
    answer: str | None
    rule: str
    cluster: int | None = None  # the selected class (see `scores`)
    cluster_sizes: tuple[int, ...] = ()
    majority_ratio: float = 0.0  # selected class size / all candidates, abstains included
    margin: float = 0.0
    tie: bool = False
    scores: tuple[CandidateScore, ...] = ()
    sandbox_seconds: float = 0.0
    evidence: Evidence | None = None

    def class_of(self, index: int) -> int | None:
        """The class of candidate `index` (None: abstained, or not among the candidates)."""
        return next((s.cluster for s in self.scores if s.index == index), None)

    def in_selected_class(self, index: int) -> bool:
        return self.cluster is not None and self.class_of(index) == self.cluster
