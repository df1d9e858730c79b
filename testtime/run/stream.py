"""Streams (`--stream`, `--bench -`): problems arrive one at a time and each is answered with the method's
state as it stands at its arrival, before anything may be learned from it (`methods/learner.py`).

Order of events per arrival: the problem is recorded (`problems.jsonl`, its label in `stream/labels.jsonl`,
the grader's copy), the learner answers it, the runner grades it and appends the result (its `answered_with`
names the state), and only then does the learner learn from it (a change is one `stream/updates.jsonl` line).
A benchmark streams in its own order or a seeded shuffle; standard input streams line by line, a bad line
being one message in `stream/rejected.jsonl` while the stream goes on; a replay answers the recorded arrivals
in their order from the cache. A resumed stream answers nothing
twice: the learner rebuilds its state from the answered problems, the one arrival that was in flight is
answered first (its calls come back from the cache), and the stream continues where it stopped.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from pydantic import ValidationError

from testtime.benchmarks.rows import utf8_line
from testtime.benchmarks.stdin import StdinStream
from testtime.core.errors import UserError
from testtime.core.jsonl import is_json, read_records
from testtime.core.records import Problem, Record, Reference
from testtime.core.results import ResultRecord, StreamUpdate, TTRLStep, read_steps
from testtime.methods.learner import Learner
from testtime.run.lifecycle import OpenRun
from testtime.run.loop import Arrival, Source


class StreamFiles:
    """The stream's own records under `stream/` in the run directory."""

    def __init__(self, run_path: Path) -> None:
        self.folder = run_path / "stream"
        self.labels = self.folder / "labels.jsonl"
        self.updates = self.folder / "updates.jsonl"
        self.rejected = self.folder / "rejected.jsonl"
        self.moves = self.folder / "weights.jsonl"  # a learning server's operator moves (`methods/ttrl/background.py`)

    def _append(self, path: Path, line: str) -> None:
        self.folder.mkdir(exist_ok=True)
        with path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")

    def append_label(self, reference: Reference) -> None:
        self._append(self.labels, reference.model_dump_json())

    def append_update(self, update: StreamUpdate) -> None:
        self._append(self.updates, update.model_dump_json())

    def append_move(self, move: dict[str, Any]) -> None:
        self._append(self.moves, json.dumps(move))

    def read_moves(self) -> list[dict[str, Any]]:
        """The operator's moves of the serving weights, oldest first (a torn last line skipped)."""
        return [json.loads(line) for line in read_records(self.moves) if is_json(line)] if self.moves.exists() else []

    def reject(self, where: str, reason: str) -> None:
        self._append(self.rejected, json.dumps({"where": where, "reason": reason, "time": time.time()}))

    def repair(self) -> None:
        """Drop a line torn by a kill -9 before appending again, so each file stays one record a line."""
        for path, kind in ((self.labels, Reference), (self.updates, StreamUpdate)):
            if path.exists():
                path.write_text("".join(r.model_dump_json() + "\n" for r in _records(path, kind)), encoding="utf-8")

    def read_labels(self) -> dict[str, Reference]:
        return {r.problem_id: r for r in _records(self.labels, Reference)}

    def read_updates(self) -> list[StreamUpdate]:
        return _records(self.updates, StreamUpdate)

    def rejected_count(self) -> int:
        return len(read_records(self.rejected)) if self.rejected.exists() else 0


def _records(path: Path, kind: type[Record]) -> list[Any]:
    """The records of a JSONL file; a line torn by a kill -9 (the last) is skipped."""
    found = []
    if path.exists():
        for line in read_records(path):
            try:
                found.append(kind.model_validate_json(line))
            except ValidationError:
                continue
    return found


def update_steps(run_path: Path) -> list[TTRLStep]:
    """Online TTRL's optimiser steps over every update (`stream/update-<k>/ttrl/steps.jsonl`), numbered on."""
    folders = sorted((run_path / "stream").glob("update-*"), key=lambda p: int(p.name.rpartition("-")[2]))
    steps: list[TTRLStep] = []
    for folder in folders:
        offset = len(steps)
        steps += [s.model_copy(update={"step": offset + s.step}) for s in read_steps(folder / "ttrl" / "steps.jsonl")]
    return steps


def arrival_order(problems: list[Problem], shuffle: bool, seed: int) -> list[Problem]:
    """A benchmark's stream: its own order, or a shuffle seeded by the run's seed."""
    order = list(problems)
    if shuffle:
        random.Random(f"stream-{seed}").shuffle(order)
    return order


async def _stdin_lines(source: BinaryIO) -> AsyncIterator[bytes]:
    """Lines of `source` as bytes as they come, read on a daemon thread (a stop signal never waits on a blocked
    read). Bytes, split on "\n": each line is decoded on its own, whatever the locale, so one bad byte costs
    that line only; the end always arrives, even if reading fails."""
    loop, queue = asyncio.get_running_loop(), asyncio.Queue[bytes | None]()

    def read() -> None:
        try:
            for line in source:
                loop.call_soon_threadsafe(queue.put_nowait, line)
        finally:
            loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=read, name="stdin-stream", daemon=True).start()
    while (line := await queue.get()) is not None:
        yield line


class StreamSource(Source):
    """A stream's arrivals, one at a time: a benchmark in its own or a seeded order, standard input's lines,
    or (a replay) the recorded arrivals. Each is recorded before it is answered; a resume first rebuilds the
    learner's state from the answered arrivals and answers the one that was in flight."""

    ordered = True

    def __init__(self, run: OpenRun) -> None:
        self.run, self.files, self.directory = run, StreamFiles(run.path), run.directory
        self.seen: dict[str, Problem] = {}
        self.answered: set[str] = set()
        self.warn: Callable[[str], None] = lambda _: None  # the run's console, from `open`

    async def open(self, learner: Learner, warn: Callable[[str], None]) -> None:
        self.warn = warn
        self.seen = self.directory.read_problems()
        self.directory.write_problems(list(self.seen.values()))  # without a line a kill -9 tore
        self.files.repair()
        results = sorted(
            (r for r in self.directory.read_results() if r.answered_with is not None),
            key=lambda r: r.answered_with.arrival if r.answered_with else 0,
        )
        self.answered = {r.problem_id for r in results}
        if not results:
            return
        # a learner rebuilds its state from what it answered, never from the grades written beside it
        answered = [(self.seen[r.problem_id], r.ungraded()) for r in results]
        note, made = await learner.restore(answered, self.files.read_updates())
        for update in made:
            self.files.append_update(update)
        resumed = f"stream resumed after {len(answered)} answered arrivals (none is answered again)"
        warn(f"{resumed}; {note}" if note else resumed)

    def learned(self, update: StreamUpdate) -> None:
        self.files.append_update(update)

    def stdin(self) -> bool:
        return not self.run.parts.problems  # standard input knows none ahead

    def known(self) -> int | None:
        return None if self.stdin() else len(self.run.parts.problems)

    def outcome(self, records: Sequence[ResultRecord]) -> dict[str, Any]:
        """A stream's problems are what arrived, in arrival order; one from a benchmark is complete once all
        arrived and were answered, one from standard input once every arrival was answered."""
        arrived = list(self.directory.read_problems())
        settings = self.run.settings
        return {
            "order": arrived,
            "complete": len(records) == (len(arrived) if self.stdin() else len(self.run.parts.problems)),
            "steps": update_steps(self.run.path),
            "stream_order": "stdin" if self.stdin() else "shuffled" if settings.shuffle else "dataset",
        }

    async def arrivals(self) -> AsyncIterator[Arrival]:
        """The arrival a stopped run had in flight (recorded, not answered), then the new ones, each recorded
        (`problems.jsonl`, its label in `stream/labels.jsonl`) before it is answered."""
        order = list(self.seen)
        labels = self.files.read_labels()
        for place, problem in enumerate(self.seen.values()):
            if problem.id not in self.answered:
                yield Arrival(problem, labels.get(problem.id, Reference(problem_id=problem.id)), place, new=False)
        async for problem, reference in self._new():
            self.directory.append_problem(problem)
            self.files.append_label(reference)
            yield Arrival(problem, reference, len(order))
            order.append(problem.id)

    async def _new(self) -> AsyncIterator[tuple[Problem, Reference]]:
        """What has not arrived before: the benchmark's order or the recorded one (a replay, answered from the
        cache), or standard input's lines (a bad line or a repeated id rejected, the stream going on)."""
        run, seen = self.run, dict(self.seen)
        if run.replay_of is not None:
            recorded = StreamFiles(run.replay_of.path).read_labels()
            for problem in run.replay_of.read_problems().values():
                if problem.id not in seen:
                    yield problem, recorded.get(problem.id, Reference(problem_id=problem.id))
            return
        benchmark = run.parts.benchmark
        if not isinstance(benchmark, StdinStream):
            for problem in arrival_order(run.parts.problems, run.settings.shuffle, run.settings.seed):
                if problem.id not in seen:
                    yield problem, run.parts.references[problem.id]
            return
        # messages name the line of this input; a line without an id is named by its place in the whole stream,
        # which a resumed stream continues (ids stay distinct across lifetimes)
        number, place = 0, len(seen) + self.files.rejected_count()
        if sys.stdin.isatty():
            self.warn("reading problems from standard input: one JSON object a line; end with Ctrl-D")
        async for raw in _stdin_lines(sys.stdin.buffer):
            number += 1
            if not raw.strip():
                continue
            place += 1
            try:
                problem, reference = benchmark.parse(utf8_line(raw, f"stdin:{number}"), number, place)
                if problem.id in seen:
                    raise UserError(f"stdin:{number}: id '{problem.id}' arrived before (answered once, not again)")
            except UserError as exc:
                self.files.reject(f"stdin:{number}", str(exc))
                self.warn(str(exc))
                continue
            seen[problem.id] = problem
            yield problem, reference
