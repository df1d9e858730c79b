"""Warm worker pools: each worker is a sandbox holding a resident harness; jobs go over a byte stream.

Sending a job is one write and one read: no container exec or process start per job. A worker that
misbehaved (limits hit, leftovers killed, no answer in time, broken stream) is destroyed and replaced.
"""

from __future__ import annotations

import json
import queue
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from testtime.core.records import TestCase
from testtime.sandbox import ExecutionReport, Limits, Sandbox, SandboxError, TestVerdict, timed_out

HARNESS_SOURCE = (Path(__file__).parent / "harness.py").read_text()


class Worker(ABC):
    @abstractmethod
    def send(self, line: str) -> None:
        """Write one job line to the harness."""

    @abstractmethod
    def receive(self, timeout_s: float) -> str | None:
        """One report line, or None when none came within the timeout."""

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
        """Start one worker with its harness ready to take a job."""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "pool_size": self.pool_size}

    def start(self) -> None:
        if self._started:
            return
        for _ in range(self.pool_size):
            self._idle.put(self._spawn())
        self._started = True

    def run(
        self, program: str, tests: Sequence[TestCase], limits: Limits | None = None, func_name: str | None = None
    ) -> ExecutionReport:
        limits = limits or Limits()
        self.start()
        job = json.dumps(
            {
                "program": program,
                "func_name": func_name,
                "early_exit": limits.early_exit,
                "limits": {
                    "timeout_s": limits.timeout_s,
                    "memory_mb": limits.memory_mb,
                    "output_bytes": limits.output_bytes,
                },
                "tests": [t.model_dump() for t in tests],
            }
        )
        worker = self._idle.get()
        started, healthy = time.perf_counter(), False
        try:
            try:
                worker.send(job)
                line = worker.receive(limits.job_timeout_s(len(tests)))
            except OSError:
                line = None  # the stream broke: the program took the worker down with it
            if line is None:
                verdicts = timed_out(tests, limits)
            else:
                report = json.loads(line)
                if "harness_error" in report:
                    raise SandboxError(f"sandbox harness failed: {report['harness_error']}")
                verdicts = [TestVerdict(**t) for t in report["tests"]]
                healthy = not report["dirty"]
        finally:
            if healthy:
                self._idle.put(worker)
            else:
                worker.destroy()
                self._idle.put(self._spawn())
        return ExecutionReport(
            backend=self.name, tests=verdicts, seconds=time.perf_counter() - started, recycled=not healthy
        )

    def close(self) -> None:
        while not self._idle.empty():
            self._idle.get_nowait().destroy()
        self._started = False
