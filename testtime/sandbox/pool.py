"""Warm worker pools: each worker is a sandbox holding a resident harness; jobs go over a byte stream.

Sending a job is one write and one read: no container exec or process start per job. The job carries test
inputs only; the host judges each result (`judge.py`), so expected outputs never enter the sandbox. Grading
(early exit) streams results and stops the job at its first failure. After each job the harness cleans up
while the host carries on; the worker's next job waits for its "ready" line, and a worker that misbehaved
(limits hit, leftovers, scratch space it could not empty, no answer in time, a broken stream) is destroyed
and replaced.
"""

from __future__ import annotations

import json
import os
import queue
import select
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from testtime.core.records import TestCase
from testtime.sandbox import ExecutionReport, Limits, Sandbox, SandboxError, TestVerdict, harness_failed, timed_out
from testtime.sandbox.judge import judge

# The cleanup's code (and what reports are accepted), the job process's, then the supervisor's: one source,
# sent into every worker.
HARNESS_FILES = ("harness_clean.py", "harness_job.py", "harness_throttle.py", "harness_zygote.py", "harness.py")
HARNESS_SOURCE = "\n".join((Path(__file__).parent / name).read_text() for name in HARNESS_FILES)
READY_TIMEOUT_S = 30.0  # start-up, or a cleanup after a job; far above what either takes


def _judged(tests: Sequence[TestCase], index: int, raw: Any, functional: bool, grader: str) -> TestVerdict:
    """The host's verdict on one test's report; a report it cannot read is the program's runtime error."""
    try:
        return TestVerdict(**judge(tests[index], raw, functional, grader))
    except (KeyError, IndexError, TypeError, ValueError, ValidationError):
        return TestVerdict(verdict="runtime_error", error="an unreadable test report")


class Worker(ABC):
    """One sandbox with its harness, talking JSON lines over a pair of descriptors."""

    read_fd: int
    write_fd: int

    def __init__(self) -> None:
        self._buffer = b""
        self.ready_pending = True  # every harness announces itself, and again after each job's cleanup

    def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message) + "\n").encode()
        while data:
            data = data[os.write(self.write_fd, data) :]

    def receive(self, timeout_s: float) -> dict[str, Any] | None:
        """One message, or None when none came within the timeout or the stream ended."""
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.read_fd], [], [], remaining)[0]:
                return None
            chunk = os.read(self.read_fd, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        try:
            message = json.loads(line)
        except ValueError:
            return None  # not the harness speaking: treated as a worker that stopped answering
        return message if isinstance(message, dict) else None

    def await_ready(self) -> list[str] | None:
        """Reasons to replace this worker after its last job (empty: reuse it); None if it never answered."""
        if not self.ready_pending:
            return []
        message = self.receive(READY_TIMEOUT_S)
        if message is None or not message.get("ready"):
            return None
        self.ready_pending = False
        return list(message.get("recycle", []))

    @abstractmethod
    def destroy(self) -> None:
        """Kill the worker and everything in it; remove what it created."""


class PooledSandbox(Sandbox):
    def __init__(self, pool_size: int = 2) -> None:
        self.pool_size = pool_size
        self._idle: queue.Queue[Worker] = queue.Queue()
        self._started = False

    @abstractmethod
    def _spawn(self) -> Worker:
        """Start one worker (its harness's first "ready" line is read by `_take`)."""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "pool_size": self.pool_size}

    def program_memory_mb(self, limits: Limits) -> int | None:
        """The address-space cap a job's program gets: the limits', or none where they ask for none (the
        sandbox's own memory bound then applies)."""
        return limits.memory_mb

    def start(self) -> None:
        if self._started:
            return
        for _ in range(self.pool_size):
            self._idle.put(self._spawn())
        self._started = True

    def _take(self) -> Worker:
        """An idle worker whose last job is cleaned up, or a fresh one in place of one that must go."""
        worker = self._idle.get()
        for _ in range(3):
            reasons = worker.await_ready()
            if reasons == []:
                return worker
            worker.destroy()
            worker = self._spawn()
        raise SandboxError("sandbox workers keep failing to start")

    def run(
        self, program: str, tests: Sequence[TestCase], limits: Limits | None = None, func_name: str | None = None
    ) -> ExecutionReport:
        limits = limits or Limits()
        self.start()
        job = {
            "program": program,
            "func_name": func_name,
            "stream": limits.early_exit,
            "grader": limits.grader,
            "limits": {
                "timeout_s": limits.timeout_s,
                "memory_mb": self.program_memory_mb(limits),
                "output_bytes": limits.output_bytes,
            },
            "inputs": [{"input": t.input, "testtype": t.testtype} for t in tests],
        }
        worker = self._take()
        started, healthy = time.perf_counter(), False
        verdicts: list[TestVerdict] | None = None
        try:
            try:
                worker.send(job)
                verdicts, healthy = self._collect(worker, tests, func_name is not None, limits)
            except OSError:
                verdicts = None  # the stream broke: the program took the worker down with it
            if verdicts is None:
                verdicts = timed_out(tests, limits)
            worker.ready_pending = True
        finally:
            if healthy:
                self._idle.put(worker)
            else:
                worker.destroy()
                self._idle.put(self._spawn())
        return ExecutionReport(
            backend=self.name, tests=verdicts, seconds=time.perf_counter() - started, recycled=not healthy
        )

    def _collect(
        self, worker: Worker, tests: Sequence[TestCase], functional: bool, limits: Limits
    ) -> tuple[list[TestVerdict] | None, bool]:
        """The job's verdicts, judged here as results arrive (None when the worker stopped answering), and
        whether the worker may serve again (not after a limit was hit)."""
        deadline = time.monotonic() + limits.job_timeout_s(len(tests))
        verdicts: list[TestVerdict] = []
        stopped = False
        while True:
            message = worker.receive(deadline - time.monotonic())
            if message is None:
                return None, False
            if "harness_error" in message:  # what the program did to its job: its verdicts, and a new worker
                return harness_failed(tests, verdicts, str(message["harness_error"])), False
            if "test" in message and not stopped:  # streamed (early exit): stop at the first failure
                verdicts.append(_judged(tests, len(verdicts), message["test"], functional, limits.grader))
                if verdicts[-1].verdict != "pass":
                    worker.send({"stop": True})
                    stopped = True
            if message.get("done"):
                raws = message.get("tests", [])
                for raw in raws if isinstance(raws, list) else [None]:
                    verdicts.append(_judged(tests, len(verdicts), raw, functional, limits.grader))
                return verdicts[: max(len(tests), 1)], not message.get("limit_hit")

    def close(self) -> None:
        while not self._idle.empty():
            self._idle.get_nowait().destroy()
        self._started = False
