"""The run loop, written once: an arrival is answered by the method's learner, graded, appended, then learned from.

Every kind of run is a `Session` fed by a `Source`: a batch's problem list (a shard's slice is one), a dataset
stream or standard input (`run/stream.py`), a served request (`serve/session.py`, one arrival per request).
The session owns what a run holds while it runs (the run directory, the engine with its ledger, cache, trace
and budgets, the grader); the source says what arrives and in what order, and records what it must (a
stream's arrivals and updates). The method is entered one way, its learner (`methods/learner.py`):

    learner.prepare(whole set)            once, when the source knows its problems ahead (offline TTRL trains here)
    for each arrival:  answer → grade → append → learn

An ordered source (a stream) answers one arrival at a time, each with the state the learner has when it
arrives; an unordered one (a batch) answers up to `concurrency` at once. Grading needs the sealed reference,
which only the session holds: the learner never sees it. A result is appended only after every call that
made it is in the ledger (the engine writes a call's line when it lands), so the ledger-before-result rule
holds here for every kind of run.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from testtime.core.errors import RunStopped
from testtime.core.records import Problem, Reference
from testtime.core.results import Grading, ProblemResult, ResultRecord, StreamUpdate, read_steps
from testtime.core.rollout import RolloutEngine
from testtime.evaluation.scoring import unlabelled
from testtime.methods.learner import Learner
from testtime.run.directory import RunDir

Grader = Callable[["Arrival", ProblemResult], Grading]  # the arrival's reference grades; None: unlabelled


@dataclass
class Arrival:
    problem: Problem
    reference: Reference | None  # None: nothing to grade against (a served request)
    place: int | None = None  # its place in an ordered source (a stream); None in a batch, which has no order
    new: bool = True  # False: it arrived before a resume and was in flight when the run stopped


def unlabelled_of(arrival: Arrival, result: ProblemResult) -> Grading:
    """The grade of an arrival with nothing to grade against (a served request): what was answered, no verdict."""
    return unlabelled(arrival.problem.domain, result)


class Source(ABC):
    """What arrives at a session, and what the source itself records of it."""

    ordered: ClassVar[bool] = False  # each arrival answered, and learned from, before the next is answered

    def whole(self) -> Sequence[Problem] | None:
        """The whole set when it is known ahead (a learner may prepare over it); None for a stream."""
        return None

    async def open(self, learner: Learner, warn: Callable[[str], None]) -> None:  # noqa: B027 - optional hook
        """Bring the learner to where a resumed source stopped (a stream rebuilds its state)."""

    @abstractmethod
    def arrivals(self) -> AsyncIterator[Arrival]:
        """What arrives, in order; an ordered source records each arrival before yielding it."""

    def learned(self, update: StreamUpdate) -> None:  # noqa: B027 - optional hook
        """Record a change of the learner's state."""

    def known(self) -> int | None:
        """How many problems the run answers, when known ahead (a progress bar's total); None: standard input."""
        return None

    @abstractmethod
    def outcome(self, records: Sequence[ResultRecord]) -> dict[str, Any]:
        """What the summary says of the arrivals (`run/outcome.write_outcome`'s fields): their order, whether
        every one arrived and was answered, the learner's optimiser steps, a stream's order."""


@dataclass
class Session:
    """One run while it runs: where its records go, the engine every call goes through, and the grader."""

    directory: RunDir
    engine: RolloutEngine | None  # None: a Ray run's driver, whose shards each hold their own
    grade: Grader
    on_result: Callable[[ResultRecord], None] = lambda record: None
    record_problems: bool = False  # append each answered problem to problems.jsonl (served requests)

    async def answer(self, arrival: Arrival, learner: Learner, source: Source | None = None) -> ResultRecord:
        """The loop's one step: answer → grade → append → learn."""
        result = await learner.answer(arrival.problem, arrival.place)
        # off the event loop (code grading runs programs in the sandbox), so sampling carries on meanwhile
        grading = await asyncio.to_thread(self.grade, arrival, result)
        record = ResultRecord.of(result, grading)
        if self.record_problems:
            self.directory.append_problem(arrival.problem)
        self.directory.append_result(record)
        self.on_result(record)
        update = await learner.learn(arrival.problem, result)
        if update is not None and source is not None:
            source.learned(update)
        if self.engine is not None:
            self.engine.forget(arrival.problem.id)
        return record

    async def drive(
        self, source: Source, learner: Learner, concurrency: int, warn: Callable[[str], None] = lambda _: None
    ) -> None:
        """Answer everything the source yields. When a budget runs out or a stop is asked for, the arrivals in
        flight finish what they started (every paid call lands in the ledger, every finished result is
        appended) and the stop is raised after them."""
        try:
            await source.open(learner, warn)
            whole = source.whole()
            if whole is not None:
                await learner.prepare(whole)
            if source.ordered:
                async for arrival in source.arrivals():
                    await self.answer(arrival, learner, source)
            else:
                await self._concurrently(source, learner, concurrency)
        finally:
            await learner.close()

    async def _concurrently(self, source: Source, learner: Learner, concurrency: int) -> None:
        slots = asyncio.Semaphore(concurrency)

        async def one(arrival: Arrival) -> None:
            async with slots:
                await self.answer(arrival, learner, source)

        tasks = [asyncio.create_task(one(arrival)) async for arrival in source.arrivals()]
        stopped: RunStopped | None = None
        try:
            for finished in asyncio.as_completed(tasks):
                try:
                    await finished
                except RunStopped as exc:
                    stopped = stopped or exc  # the others now fail fast at their next call
        finally:
            for task in tasks:
                task.cancel()
        if stopped is not None:
            raise stopped


class ProblemList(Source):
    """A batch: the problems not yet answered (a shard's slice is its own list), answered concurrently."""

    def __init__(
        self, problems: Sequence[Problem], todo: Sequence[Problem], references: Mapping[str, Reference], path: Path
    ) -> None:
        self.problems, self.todo, self.references, self.path = problems, todo, references, path

    def whole(self) -> Sequence[Problem]:
        return self.problems

    def known(self) -> int:
        return len(self.problems)

    def outcome(self, records: Sequence[ResultRecord]) -> dict[str, Any]:
        return {
            "order": [p.id for p in self.problems],
            "complete": len(records) == len(self.problems),
            "steps": read_steps(self.path / "ttrl" / "steps.jsonl"),  # offline TTRL's
        }

    async def arrivals(self) -> AsyncIterator[Arrival]:
        for problem in self.todo:
            yield Arrival(problem, self.references[problem.id])
