"""The one contract between a method and the run loop (`run/loop.py`): a method answers through its `Learner`.

A `Learner` may `prepare` over a whole set when the run knows it ahead (offline TTRL trains there), answers
one problem with its state as it stands (`answer`), and only then may learn from it (`learn`), so no answer
can come from a state that learned from its own problem. `state` counts what the learner has learned (TTRL:
optimiser steps; shared memory: its version; a method that does not adapt: 0) and is written into every
result of a stream as `answered_with` (a batch has no arrival order: its results carry none). `restore`
rebuilds the state a resumed stream had after its answered problems, so each later arrival meets the state
an uninterrupted stream would have given it. A per-problem method's learner is `NoAdaptation`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar, Literal

from testtime.core.records import Problem
from testtime.core.results import AnsweredWith, ProblemResult, StreamUpdate

if TYPE_CHECKING:
    from testtime.methods import MethodContext, PerProblem


class Learner(ABC):
    """What answers in the run loop: `prepare` over a whole set (optional), `answer` one problem with the state as
    it stands, `learn` from it after (optional), `restore` a resumed stream's state (optional), `close`."""

    kind: ClassVar[Literal["none", "memory", "weights"]]

    @property
    @abstractmethod
    def state(self) -> int:
        """What the learner has learned so far (written as `answered_with.state`)."""

    async def prepare(self, problems: Sequence[Problem]) -> None:  # noqa: B027 - optional hook
        """Work over the whole set before any answer (a batch: every problem of the run, answered or not)."""

    @abstractmethod
    async def answer(self, problem: Problem, arrival: int | None) -> ProblemResult:
        """Answer with the state as it is; on a stream (`arrival`: its place) the result carries `answered_with`."""

    async def learn(self, problem: Problem, result: ProblemResult) -> StreamUpdate | None:
        """Learn from an answered problem; the update when the state changed (None: it did not)."""
        return None

    async def restore(
        self, answered: Sequence[tuple[Problem, ProblemResult]], updates: Sequence[StreamUpdate]
    ) -> tuple[str, list[StreamUpdate]]:
        """Rebuild the state after `answered` (in arrival order, results without their grades: `ungraded`;
        `updates` were recorded for them): what was
        done, for the console, and the updates that learning from them made but the record lacks (a run stopped
        between an answer and its update). A learner that makes model calls here resumes them from the cache."""
        return "", []

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Free what the learner holds (weights)."""

    def answered_with(self, arrival: int | None, memory: tuple[int, ...] = ()) -> AnsweredWith | None:
        if arrival is None:
            return None
        return AnsweredWith(arrival=arrival, state=self.state, kind=self.kind, memory=memory)


class NoAdaptation(Learner):
    """A per-problem method: each problem answered on its own (in a batch, concurrently); nothing carries over."""

    kind = "none"

    def __init__(self, method: PerProblem, ctx: MethodContext) -> None:
        self.method, self.ctx = method, ctx

    @property
    def state(self) -> int:
        return 0

    async def answer(self, problem: Problem, arrival: int | None) -> ProblemResult:
        result = await self.method.solve(problem, self.ctx)
        return result.model_copy(update={"answered_with": self.answered_with(arrival)})
