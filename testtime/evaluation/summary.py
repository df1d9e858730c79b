"""The run summary (`summary.json`): a typed, versioned record of what a run measured.

What was not measured is `null`, never 0: accuracy when no sample succeeded (every call failed) or no
problem carries a label, cost when any paid call had no known price. Metric names are one per quantity,
here and everywhere they are shown: `accuracy` (the method's final answer), `pass@1` (the mean accuracy of
the final samples, avg@k; for TRT and RSA the last round's), `maj@k` (a majority vote over k samples).
The run directory reads and writes it (`run.directory`); files written before the schema was versioned are
read through `run.migrate`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from testtime.core.ledger import LedgerTotals
from testtime.evaluation.metrics import Interval

SUMMARY_SCHEMA_VERSION = 2


# how a stream's arrivals came: a dataset in its order or shuffled, standard input, a server's requests
StreamOrder = Literal["dataset", "shuffled", "stdin", "served"]


class SummaryRecord(BaseModel):
    """Summary parts: field names with an `@` are written by their alias (`pass@1`), read by either."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, serialize_by_alias=True)


class LedgerSummary(SummaryRecord):
    calls: int = 0  # model calls that reached a backend (paid), cache hits excluded
    cache_hits: int = 0
    errors: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens: int = 0  # of the calls whose counts are known (see unknown_token_calls)
    unknown_token_calls: int = 0  # paid calls whose server gave no usable token counts
    truncated_calls: int = 0  # model calls (paid or cached, every kind) that stopped at max_tokens
    cost_usd: float | None = None  # None: some paid call had no known price
    known_cost_usd: float = 0.0  # the part of the cost whose prices are known (a lower bound when cost_usd is None)
    model_seconds: float = 0.0
    sandbox_seconds: float = 0.0
    train_steps: int = 0
    train_tokens: int = 0
    train_flops: float | None = None  # None: no training step (an estimate when present, never measured)
    train_seconds: float = 0.0

    @classmethod
    def of(cls, totals: LedgerTotals) -> LedgerSummary:
        values = {k: v for k, v in totals.as_dict().items() if k in cls.model_fields}
        values["cost_usd"] = totals.cost_usd if totals.cost_known else None
        values["known_cost_usd"] = totals.cost_usd
        values["train_flops"] = totals.train_flops if totals.train_steps else None
        return cls.model_validate(values)


class RoundsSummary(SummaryRecord):
    """Per round (TRT) or step (RSA), averaged over problems, from the sealed references."""

    accuracy: list[float]  # the round's selected answer was correct
    coverage: list[float]  # some rollout so far was correct (what a perfect selector could reach)
    pass_at_1: list[float] = Field(alias="pass@1")  # the mean accuracy of the round's rollouts


class KnowledgeHealth(SummaryRecord):
    """TRT: whether its knowledge machinery did anything. On the embedded model it once did not (0 of 32 strategy
    lists and 2 of 64 reflections parsed, no lesson entered), and the run was reported as TRT all the same."""

    strategy_lists: int  # problems whose strategy list was asked for
    strategy_lists_parsed: int  # of those, the model's own list was usable (else the fallback strategies ran)
    reflections: int  # reflection calls
    reflections_parsed: int
    lessons_entered: int | None  # lessons that entered a knowledge list, over every problem; None: no list
    problems_with_lessons: int | None  # problems whose list held at least one lesson; None: no list


class SameTokensMajority(SummaryRecord):
    k: int
    capped: bool  # the base evaluation has fewer samples than the budget buys
    accuracy: float


class TTRLCompute(SummaryRecord):
    rollout_tokens: int
    train_tokens: int
    train_flops: float
    tokens_per_problem: float
    base_tokens_per_answer: float | None = None
    same_tokens_k: int | None = None
    base_majority_at_same_tokens: SameTokensMajority | None = None


class TTRLPerStep(SummaryRecord):
    step: list[int] = []
    label_correct: list[float] = []
    reward_accuracy: list[float] = []  # empty where the rewards are not 0/1
    ground_truth_ratio: list[float] = []
    train_pass_at_k: list[float] = Field(default=[], alias="train_pass@k")
    extinction: list[float] = []


class TTRLHealth(SummaryRecord):
    extinct_at_last_visit: float
    labels_went_wrong: int
    wrong_to_extinct_steps: list[int]


class TTRLSummary(SummaryRecord):
    pass_at_1_before: Interval = Field(alias="pass@1_before")
    pass_at_1_after: Interval = Field(alias="pass@1_after")
    pass_at_1_gain: Interval = Field(alias="pass@1_gain")  # paired by problem
    greedy_before: float | None = None
    greedy_after: float | None = None
    # the trained model's sampled pass@1 minus the base's greedy answer, and greedy after minus greedy before,
    # each paired by problem: does TTRL do more than sharpen the distribution as greedy decoding already does?
    pass_at_1_after_vs_greedy_before: Interval | None = Field(None, alias="pass@1_after_vs_greedy_before")
    greedy_gain: Interval | None = None
    maj_at_k_before: dict[str, float] = Field(default={}, alias="maj@k_before")
    per_step: TTRLPerStep = TTRLPerStep()
    health: TTRLHealth | None = None
    compute: TTRLCompute | None = None


class Distribution(SummaryRecord):
    """A label-free quantity over problems: its mean and quartiles."""

    n: int
    mean: float
    q1: float
    median: float
    q3: float


class LabelFreeSummary(SummaryRecord):
    """What the run says without labels (measured on every problem, labelled or not); null where the method
    has no such quantity."""

    answer_rate: float | None = None  # problems with a final answer
    confidence: Distribution | None = None  # the predictions' confidence (predictions.jsonl)
    vote_share: Distribution | None = None  # the selected class's share of the samples
    margin: Distribution | None = None  # its lead over the runner-up
    support: Distribution | None = None  # TRT: the final answer's net support (concluded − refuted) / all conclusions
    refuted_share: float | None = None  # TRT: problems whose final answer some rollout refuted
    execution_agreement: Distribution | None = None  # code: candidates behaving like the chosen program
    ttrl_majority_ratio: list[float] | None = None  # TTRL: the vote's majority ratio per optimiser step
    # free-form text: selections that asked the model to judge, and how many of those fell back to word overlap
    # (the judge named no group or no reply); null where no judgement was asked
    judged: int | None = None
    judge_fell_back: int | None = None
    # of those, USC selections whose pick held and only the grouping (the confidence's classes) fell back
    judge_grouping_fell_back: int | None = None


class AdaptiveSummary(SummaryRecord):
    """--adaptive: how far the votes went before they settled (`core/adaptive.py`), measured per problem."""

    rule: str  # the rule most votes ran
    threshold: float | None
    rules: dict[str, int] | None = None  # "rule threshold" → votes, where they ran several (served requests' own)
    samples: int  # drawn by the votes, over every problem
    cap_samples: int  # what the votes would have drawn at the cap (--n): the fixed run's samples
    share: float  # samples / cap_samples
    settled: int  # problems whose vote stopped before the cap
    drawn: Distribution  # samples a problem's vote drew


class ForwardPasses(SummaryRecord):
    """A local backend's batched generate calls (`hf:`, `vllm:`) and the sequences they carried, in the run's last
    lifetime (a resumed run's earlier lifetimes are not counted): a batch decodes about as fast with 2 rows as with
    16 on a CPU, so its wall time follows the batches as much as the tokens."""

    batches: int
    rows: int  # samples generated, cached ones not included
    rows_per_batch: float | None  # None: no batch ran (every sample came from the cache)
    max_rows: int  # the most a batch may carry (the backend's max_batch)


class PrequentialWindow(SummaryRecord):
    """Consecutive arrivals of a stream (`evaluation/prequential.py`)."""

    first: int  # arrivals first..last, from 0
    last: int
    accuracy: Interval | None = None  # None: no labelled arrival in the window
    vote_share: float | None = None  # None: no answer in the window had a vote
    answer_rate: float
    state: int


class PrequentialSummary(SummaryRecord):
    arrivals: int
    order: StreamOrder
    learner: Literal["none", "memory", "weights"]
    updates: int  # state changes (stream/updates.jsonl)
    final_state: int
    accuracy: Interval | None = None  # over the labelled arrivals; None: none carried a label
    running_accuracy: list[float | None] = []  # after each arrival, over the labelled ones so far
    window: int
    windows: list[PrequentialWindow] = []


class RunSummary(SummaryRecord):
    """summary.json: a run's accuracy (with its interval), pass@1, maj@k, the label-free statistics, every
    token and dollar from the ledger, and the caveats that qualify the numbers."""

    schema_version: int = SUMMARY_SCHEMA_VERSION
    method: str = ""
    bench: str = ""
    model: str = ""
    n: int | None = None  # samples per problem the method drew (the manifest's effective n)
    problems: int
    labelled: int = 0  # problems with a label to grade against; accuracy, pass@1 and maj@k are over these
    unlabelled: int = 0  # problems without one: answered, never graded
    accuracy: Interval | None = None  # None: nothing measured (no sample succeeded, or no labels)
    pass_at_1: Interval | None = Field(default=None, alias="pass@1")
    maj_at_k: dict[str, float] | None = Field(default=None, alias="maj@k")
    samples: int = 0
    no_answer_rate: float | None = None
    truncation_rate: float | None = None  # of every model call (solvers, strategies, reflections...), cut at max_tokens
    error_rate: float | None = None
    first_error: str | None = None
    rounds: RoundsSummary | None = None
    trt_knowledge: KnowledgeHealth | None = None  # TRT with strategies or a knowledge list; null otherwise
    # Majority at the same solver rollouts (TRT's T·K, RSA's N·T), not the same tokens (`report` gives both);
    # TTRL: at the same tokens. The name is kept: records are contracts.
    same_budget_majority_n: int | None = None
    ttrl: TTRLSummary | None = None
    label_free: LabelFreeSummary | None = None
    prediction_status: dict[str, int] = {}
    sample_status: dict[str, int] = {}
    graded_on_public_tests_only: int = 0
    errata_problems: list[str] = []
    grader: str | None = None  # code: lenient | official
    ledger: LedgerSummary = LedgerSummary()
    calls_per_problem: float | None = None
    wall_s: float | None = None
    replay: bool = False
    complete: bool = True
    stopped: str | None = None  # the budget that stopped the run
    retried_problems: int = 0
    uses_labels: bool = False  # the method trained on the labels (TTRL's oracle): an upper bound, not label-free
    # TTRL: why these problems are the ones its preset was tuned on (its figures are not held out); null otherwise
    on_tuned_set: str | None = None
    prequential: PrequentialSummary | None = None  # a stream: accuracy over arrival order; None: not a stream
    adaptive: AdaptiveSummary | None = None  # --adaptive: the samples the votes drew against the cap; else None
    forward_passes: ForwardPasses | None = None  # hf:, vllm: the batches generated; None: a server batches its own
    warnings: list[str] = []  # what makes these numbers measure less than they seem (`evaluation/caveats.py`)

    @property
    def measured(self) -> bool:
        return self.accuracy is not None

    def all_failed(self) -> bool:
        """No call that reached a backend succeeded (and some did): the run measured nothing."""
        return self.ledger.calls > 0 and self.ledger.errors == self.ledger.calls and self.first_error is not None
