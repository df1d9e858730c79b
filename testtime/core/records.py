"""The vocabulary: problems, sealed references, messages, sampling, completions, candidates, selections.

These pydantic records cross package and file boundaries (results.jsonl, the cache, the ledger).
`Problem` deliberately has no field that can hold an answer or hidden tests: labels live only in
`Reference`, which methods never receive (architecture invariant 1).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, field_validator

# Keys that would smuggle a label into a problem through its free-form metadata.
LABEL_KEYS = frozenset(
    {
        "answer",
        "answers",
        "solution",
        "solutions",
        "label",
        "labels",
        "ground_truth",
        "gold",
        "target",
        "private_test_cases",
        "hidden_tests",
        "reference",
    }
)


def recordable(text: str) -> str:
    """`text` as every record can hold it: the one place outside text is made encodable. A lone surrogate (a
    JSON `\\ud800` escape in a reply or a data file decodes to one, and UTF-8 cannot encode it) becomes U+FFFD;
    a surrogate pair becomes its character. NUL, U+2028 and any length are kept: JSON writes them safely."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


# A string from outside (a model's reply, a data file, a client's request): made recordable when the record is built.
Text = Annotated[str, AfterValidator(recordable)]


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TestCase(Record):
    """One test. `output` is None for a generated input whose expected output nobody knows."""

    __test__ = False  # a record, not a pytest test class

    input: Text
    output: Text | None
    testtype: Literal["stdin", "functional"] = "stdin"


class Problem(Record):
    """What a method sees: the statement and the public examples, never the answer."""

    id: Text
    domain: Literal["math", "code", "text"]  # text: free-form replies, the whole reply is the answer
    statement: Text
    starter_code: Text = ""
    public_tests: tuple[TestCase, ...] = ()
    metadata: dict[str, Any] = {}

    @field_validator("metadata")
    @classmethod
    def _no_labels_in_metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        leaked = LABEL_KEYS.intersection(k.lower() for k in value)
        if leaked:
            raise ValueError(f"problem metadata may not carry labels: {sorted(leaked)}")
        return value


class Reference(Record):
    """The label side of a problem: only the scorer and the audit read it."""

    problem_id: Text
    answer: Text | None = None
    hidden_tests: tuple[TestCase, ...] = ()  # code: the full evaluation suite (public + private tests)
    metadata: dict[str, Any] = {}  # grading notes, e.g. {"public_only": True} when private tests are missing

    @property
    def labelled(self) -> bool:
        """Whether there is anything to grade against (a user's problem may come without its answer)."""
        return self.answer is not None or bool(self.hidden_tests)


class Message(Record):
    """One chat turn: a role (system, user, assistant) and its text."""

    role: Literal["system", "user", "assistant"]
    content: Text


class SamplingParams(Record):
    """What one model call sends: temperature, top-p, max new tokens and the seed."""

    temperature: float = 0.7
    top_p: float = 1.0
    max_tokens: int = 512
    seed: int | None = None
    stop: tuple[str, ...] = ()
    # Ask for each sample's token statistics: None none; k the alternatives a server reports per token (its
    # `top_logprobs`, 0–20; the hf: backend always reads its full distribution). Set by the engine for a run
    # with --logprobs; a sample's cache key leaves it out when None, so older keys stay valid.
    logprobs: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


class Usage(Record):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    known: bool = True  # False: the server reported no usable counts (0 here then means unknown, not free)


ABSURD_TOKENS = 100_000_000  # a count above this, in one call, is a server's error, not a measurement


def usage_from(raw: object) -> Usage:
    """A server's `usage` object, checked: counts that are not plain non-negative integers (strings, lists,
    negatives, floats with a fraction, absurd sizes) make the usage unknown, never a crash or a stored lie."""
    if not isinstance(raw, dict):
        return Usage(known=False)
    counts = []
    for key in ("prompt_tokens", "completion_tokens"):
        value = raw.get(key)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= ABSURD_TOKENS:
            return Usage(known=False)
        counts.append(value)
    return Usage(prompt_tokens=counts[0], completion_tokens=counts[1])


FinishReason = Literal["stop", "length", "error", "timeout"]


class TokenStats(Record):
    """A sample's tokens under the model that wrote it, averaged over its tokens (`models/confidence.py`).
    `null` for what the backend did not give (a server that returned no alternatives has no entropy)."""

    tokens: int
    logprob_mean: float | None = None  # the chosen tokens' log-probability
    entropy_mean: float | None = None  # the distribution's entropy
    self_certainty: float | None = None  # KL(uniform ‖ p), as Intuitor
    top_k: int | None = None  # None: over the full distribution; k: over the k likeliest tokens, renormalised
    temperature: float | None = None  # the distribution's temperature (the sampling one); None: a server's, or 1


class Completion(Record):
    """One sample. A failed call is a Completion with `error` set, never a fake answer (invariant 6)."""

    text: Text = ""
    finish_reason: FinishReason = "stop"
    usage: Usage = Usage()
    latency_s: float = 0.0
    cost_usd: float | None = None
    error: Text | None = None
    cached: bool = False
    call: str | None = None  # the trace's id of the call that produced it (its cache key, short)
    token_stats: TokenStats | None = None  # when the run asked for them (--logprobs) and the backend gave them


class Candidate(Record):
    """A completion as a selector sees it: its text and the answer extracted from it (None = no answer)."""

    index: int
    text: Text
    answer: Text | None
    finish_reason: FinishReason = "stop"
    error: Text | None = None
    completion_tokens: int = 0
    call: str | None = None  # the model call in the run's trace that produced it
    token_stats: TokenStats | None = None  # its tokens' log-prob, entropy, self-certainty (--logprobs); null: not asked
