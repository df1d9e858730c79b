"""The `LanguageModel` contract every backend in `testtime.models` implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from testtime.core.records import Completion, Message, SamplingParams

# The problem a model call belongs to, set by the rollout engine around each call: a fleet of servers keeps
# one problem's calls on one server (models/fleet.py), whatever method or round made them.
CALL_PROBLEM: ContextVar[str | None] = ContextVar("testtime_call_problem", default=None)


@dataclass
class BatchCounts:
    """A local backend's batched generate calls and the sequences they carried: one batch's decoding costs about
    as much for 2 rows as for 16 on a CPU, so wall time follows the batches as much as the tokens."""

    max_rows: int
    batches: int = 0
    rows: int = 0

    def add(self, rows: int) -> None:
        self.batches += 1
        self.rows += rows


class LanguageModel(ABC):
    """Async text generation. Backends raise `TransientModelError` for what a retry may fix and
    `ModelError` for what it will not; the rollout engine owns retries and the ledger."""

    name: str
    # What `SamplingParams.logprobs` gets from this backend: each sample's statistics over the full
    # distribution, over the k likeliest tokens a server reports, or nothing (then --logprobs is refused).
    token_stats: Literal["full", "top-k"] | None = None
    # Whether one request can return several samples (an OpenAI-compatible server's `n`): with
    # --n-per-request the engine then asks for a problem's samples in one call (one prefill).
    takes_n: bool = False

    @property
    def prices_calls(self) -> bool:
        """Whether each call comes back with its cost (local compute: $0); False where the price is unknown (a
        remote OpenAI-compatible server, a model litellm has no price for): `--max-cost` then needs `--price`."""
        return True

    @abstractmethod
    async def generate(self, messages: Sequence[Message], n: int, params: SamplingParams) -> list[Completion]:
        """Return `n` samples for one conversation."""

    def describe(self) -> dict[str, Any]:
        """What config.json records to rebuild this model."""
        return {"name": self.name}

    def secrets(self) -> list[str]:
        """Values that must never appear in a recorded or printed error (the keys this backend sends)."""
        return []

    def batch_counts(self) -> BatchCounts | None:
        """The batched generate calls this backend ran (None: it does not batch: a server batches its own)."""
        return None

    async def aclose(self) -> None:  # noqa: B027 - optional hook; most backends hold nothing to release
        """Release engines, sessions, threads."""
