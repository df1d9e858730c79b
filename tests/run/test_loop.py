"""The run loop (`run/loop.py`) on its own: the order of its step, what a learner is shown, and how it stops.

A recording learner stands in for a method: every kind of run drives one of these through `Session.drive` (or,
served, `Session.answer`), so what holds here holds for all of them; the runs end to end are in test_stream,
test_lifecycle, test_shard, test_ray_shards and tests/serve."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from testtime.core.errors import RunStopped
from testtime.core.records import Problem, Reference
from testtime.core.results import Grading, ProblemResult, ResultRecord, StreamUpdate
from testtime.methods.learner import Learner
from testtime.run.directory import RunDir
from testtime.run.loop import Arrival, ProblemList, Session, Source, unlabelled_of

PROBLEMS = [Problem(id=f"p{i}", domain="math", statement=f"{i} + {i}") for i in range(6)]


class Recording(Learner):
    """Answers `2i` to problem `pi`, after `delay(i)` seconds; logs every call in order."""

    kind = "memory"

    def __init__(self, delay: float = 0.0, stop_at: str | None = None) -> None:
        self.log: list[tuple[str, str]] = []
        self.delay, self.stop_at = delay, stop_at
        self.learned = 0
        self.in_flight = self.most_in_flight = 0

    @property
    def state(self) -> int:
        return self.learned

    async def prepare(self, problems: Sequence[Problem]) -> None:
        self.log.append(("prepare", ",".join(p.id for p in problems)))

    async def answer(self, problem: Problem, arrival: int | None) -> ProblemResult:
        self.log.append(("answer", problem.id))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay * (6 - int(problem.id[1:])))  # later problems finish first
            if problem.id == self.stop_at:
                raise RunStopped("budget reached")
        finally:
            self.in_flight -= 1
        answer = str(2 * int(problem.id[1:]))
        return ProblemResult(problem_id=problem.id, prediction=answer, answered_with=self.answered_with(arrival))

    async def learn(self, problem: Problem, result: ProblemResult) -> StreamUpdate | None:
        self.log.append(("learn", problem.id))
        self.learned += 1
        return StreamUpdate(state=self.learned, arrivals=self.learned, learned_from=(problem.id,))

    async def close(self) -> None:
        self.log.append(("close", ""))


class Ordered(Source):
    ordered = True

    def __init__(self) -> None:
        self.updates: list[StreamUpdate] = []

    async def arrivals(self) -> AsyncIterator[Arrival]:
        for place, problem in enumerate(PROBLEMS):
            yield Arrival(problem, Reference(problem_id=problem.id, answer=str(2 * place)), place)

    def learned(self, update: StreamUpdate) -> None:
        self.updates.append(update)

    def outcome(self, records: Sequence[ResultRecord]) -> dict[str, Any]:
        return {}


def graded(arrival: Arrival, result: ProblemResult) -> Grading:
    """The reference reaches the grader only: the learner never had it."""
    assert arrival.reference is not None
    correct = result.prediction == arrival.reference.answer
    return Grading(correct=correct, status="correct" if correct else "wrong", graded_answer=result.prediction)


def session(tmp_path: Path, grade: Any = graded) -> Session:
    return Session(RunDir.create(tmp_path / "run"), engine=None, grade=grade)  # type: ignore[arg-type]


def test_an_ordered_source_answers_each_arrival_after_the_last_one_was_learned_from(tmp_path: Path) -> None:
    learner, source, run = Recording(delay=0.001), Ordered(), session(tmp_path)
    asyncio.run(run.drive(source, learner, concurrency=8))
    steps = [entry for entry in learner.log if entry[0] in ("answer", "learn")]
    assert steps == [(kind, p.id) for p in PROBLEMS for kind in ("answer", "learn")]
    assert learner.log[-1] == ("close", "")
    assert not [entry for entry in learner.log if entry[0] == "prepare"]  # a stream has no whole set ahead
    records = run.directory.read_results()
    assert [r.answered_with.state for r in records if r.answered_with] == list(range(6))  # the state it met
    assert all(r.correct for r in records) and [u.state for u in source.updates] == list(range(1, 7))


def test_a_batch_prepares_over_the_whole_set_and_answers_only_what_is_left_concurrently(tmp_path: Path) -> None:
    learner, run = Recording(delay=0.01), session(tmp_path)
    references = {p.id: Reference(problem_id=p.id, answer=str(2 * int(p.id[1:]))) for p in PROBLEMS}
    todo = PROBLEMS[2:]  # two were answered before a resume
    asyncio.run(run.drive(ProblemList(PROBLEMS, todo, references, tmp_path), learner, concurrency=3))
    assert learner.log[0] == ("prepare", "p0,p1,p2,p3,p4,p5")  # offline TTRL trains on every problem
    assert sorted(p for kind, p in learner.log if kind == "answer") == ["p2", "p3", "p4", "p5"]
    assert learner.most_in_flight == 3
    records = run.directory.read_results()
    assert sorted(r.problem_id for r in records) == ["p2", "p3", "p4", "p5"] and all(r.correct for r in records)
    assert all(r.answered_with is None for r in records)  # a batch has no arrival order to record


def test_a_stop_in_one_arrival_lets_the_others_finish_then_is_raised(tmp_path: Path) -> None:
    learner, run = Recording(delay=0.01, stop_at="p1"), session(tmp_path)
    references = {p.id: Reference(problem_id=p.id) for p in PROBLEMS}
    with pytest.raises(RunStopped, match="budget"):
        asyncio.run(run.drive(ProblemList(PROBLEMS, PROBLEMS, references, tmp_path), learner, concurrency=6))
    # p0 takes longest and was still in flight when p1 stopped: it landed, and was appended, before the raise
    assert sorted(r.problem_id for r in run.directory.read_results()) == ["p0", "p2", "p3", "p4", "p5"]
    assert learner.log[-1] == ("close", "")


def test_a_result_is_appended_only_after_it_is_graded_and_learned_from_only_after_it_is_appended(
    tmp_path: Path,
) -> None:
    run = session(tmp_path)
    seen: list[str] = []

    def grade(arrival: Arrival, result: ProblemResult) -> Grading:
        seen.append(f"grade {arrival.problem.id}, {len(run.directory.read_results())} appended")
        return unlabelled_of(arrival, result)

    class Watching(Recording):
        async def learn(self, problem: Problem, result: ProblemResult) -> StreamUpdate | None:
            seen.append(f"learn {problem.id}, {len(run.directory.read_results())} appended")
            return None

    run.grade = grade
    run.record_problems = True  # a served request's problem is recorded with its answer
    asyncio.run(run.answer(Arrival(PROBLEMS[0], reference=None), Watching()))
    assert seen == ["grade p0, 0 appended", "learn p0, 1 appended"]
    [record] = run.directory.read_results()
    assert record.status == "unlabelled" and record.correct is None
    assert list(run.directory.read_problems()) == ["p0"]
