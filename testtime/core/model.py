"""The `LanguageModel` contract every backend in `testtime.models` implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Literal

from testtime.core.records import Completion, Message, SamplingParams


class LanguageModel(ABC):
    """Async text generation. Backends raise `TransientModelError` for what a retry may fix and
    `ModelError` for what it will not; the rollout engine owns retries and the ledger."""

    name: str
    # What `SamplingParams.logprobs` gets from this backend: each sample's statistics over the full
    # distribution, over the k likeliest tokens a server reports, or nothing (then --logprobs is refused).
    token_stats: Literal["full", "top-k"] | None = None

    @abstractmethod
    async def generate(self, messages: Sequence[Message], n: int, params: SamplingParams) -> list[Completion]:
        """Return `n` samples for one conversation."""

    def describe(self) -> dict[str, Any]:
        """What config.json records to rebuild this model."""
        return {"name": self.name}

    def secrets(self) -> list[str]:
        """Values that must never appear in a recorded or printed error (the keys this backend sends)."""
        return []

    async def aclose(self) -> None:  # noqa: B027 - optional hook; most backends hold nothing to release
        """Release engines, sessions, threads."""
