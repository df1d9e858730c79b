"""Running untrusted code: generated programs and generated tests never run on the host (invariant 5).

Threat model. The adversary is a program (or test) written by a model, or a policy under RL pressure looking
for a reward hack: it may loop, fork-bomb, allocate without bound, print without bound, read or write files,
open sockets, read the environment, signal or kill its parent, leave processes or files behind for the next
job, read other processes' memory through /proc, or try to forge or read off its verdict.

What holds, on both backends:
- Expected outputs never enter the sandbox. A job carries the program and its tests' inputs; the harness
  reports what the program printed or returned and how it ended, and the host judges (`judge.py`). A program
  may see the inputs of its own job's tests; it can never see, nor search memory for, an expected output.
- The resident harness (`harness.py`) is PID 1 of the sandbox's pid namespace, so programs cannot signal it,
  and it is non-dumpable, so /proc/1/mem, maps and environ are unreadable to them. Each test runs in a forked
  job process with rlimits on address space, CPU time and file size and only stdin/stdout/stderr and a result
  pipe open; the harness enforces wall time and output size.
- Every job starts from the same state. After each job the harness kills every leftover process (detached
  daemons included), wipes the scratch space (`/tmp` and `/dev/shm`, tmpfs of SCRATCH_MB each, and Docker's
  `/dev/mqueue`) and verifies it is empty and that no SysV IPC object survives; the next job is sent only after
  that. Nothing else is writable. A worker whose job hit a limit, left processes, or could not be cleaned is
  destroyed and replaced.
- No network, uid 65534, no capabilities, an empty environment (no host variables, no keys), read-only root.

Per backend:
- `docker` (default where an engine answers): `network_mode=none`, no-new-privileges, memory (no swap), pids
  and CPU limits, our system-call allowlist (`syscall_filter.py`: Docker's default profile, which also denies
  new user namespaces, with io_uring and ptrace refused too). The only host path
  inside is an empty folder, bound read-only, where the harness's unix socket was (removed once it connected).
- `bwrap` (bubblewrap): every namespace unshared (network, pid, ipc, uts, user, mount), nested user namespaces
  disabled, `/usr` bound read-only, `/dev` and `/proc/sys` read-only; started by root, it runs as the host's
  uid 65534, so no host `/proc` file is writable through a root mapping; a cgroup per worker (v2, else v1)
  bounds memory, pids and CPU (`cpus`, as Docker's) when the host offers one (`testtime sandbox check` says
  whether it does); without one, the harness throttles the jobs' CPU itself. The same system-call allowlist as
  Docker's, loaded by bwrap (`--seccomp`) before the harness starts.

Containers, folders and cgroups carry their owner's identity; a killed run's leftovers are reaped by the
next sandbox that starts (`owner.py`, `testtime sandbox check` and `clean`).

Not isolated: memory bandwidth and caches are shared with the host (timing noise), and the kernel is the host's
(a kernel exploit escapes every backend here; use VMs if that is in scope).

Failures: what the program does comes back as verdicts (`pass`, `wrong_answer`, `time_limit`,
`runtime_error`, `memory_limit`, `output_limit`). What the infrastructure does (no engine, missing image,
a worker that cannot start) raises `SandboxError`; it never silently falls back to running on the host.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from testtime.core.errors import UserError
from testtime.core.records import TestCase
from testtime.core.registry import Registry

SCRATCH_MB = 64  # the size of each writable tmpfs (/tmp, /dev/shm), the same on every backend
Verdict = Literal["pass", "wrong_answer", "time_limit", "runtime_error", "memory_limit", "output_limit"]


class SandboxError(UserError):
    """The sandbox itself failed (engine gone, image missing): not a verdict on the program."""


class Limits(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout_s: float = 6.0  # per test, as LiveCodeBench
    memory_mb: int | None = 1024  # None: no cap of the program's own, only the sandbox's (the official grader)
    output_bytes: int = 1 << 20
    early_exit: bool = False  # stop at the first failing test (grading); selectors need run-all
    # lenient: a fresh Solution per test, results compared as JSON (nested tuples are lists, keys strings),
    # a non-zero SystemExit is a runtime error. official: LiveCodeBench's grader exactly (judge.py).
    grader: Literal["lenient", "official"] = "lenient"

    def job_timeout_s(self, tests: int) -> float:
        """Wall-clock bound for a whole job before its worker is presumed stuck and replaced."""
        return (self.timeout_s + 1.0) * max(tests, 1) + 5.0


class TestVerdict(BaseModel):
    __test__ = False  # a record, not a pytest test class
    model_config = ConfigDict(extra="forbid")

    verdict: Verdict
    seconds: float = 0.0
    error: str | None = None
    compile_error: bool = False
    output: str = ""  # the first 1,000 characters of what the program produced
    output_digest: str = ""  # hash of the whole normalised output, for clustering by behaviour
    clean: bool = False  # it ran to the end and gave its output (a function returned), whatever the comparison


class ExecutionReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    backend: str
    tests: list[TestVerdict]
    seconds: float = 0.0
    recycled: bool = False  # the worker misbehaved and was replaced

    @property
    def passed(self) -> bool:
        """All tests passed. An empty suite never passes (LiveCodeBench judges scoring all([]) as PASS)."""
        return bool(self.tests) and all(t.verdict == "pass" for t in self.tests)


class Sandbox(ABC):
    """Lifecycle: `start()`, then any number of `run()` calls (thread-safe), then `close()`."""

    name: str

    @abstractmethod
    def start(self) -> None:
        """Acquire workers; raise SandboxError if the backend cannot run here."""

    @abstractmethod
    def run(
        self, program: str, tests: Sequence[TestCase], limits: Limits | None = None, func_name: str | None = None
    ) -> ExecutionReport:
        """Run one program against its tests and return the verdicts."""

    async def arun(
        self, program: str, tests: Sequence[TestCase], limits: Limits | None = None, func_name: str | None = None
    ) -> ExecutionReport:
        return await asyncio.to_thread(self.run, program, tests, limits, func_name)

    @abstractmethod
    def close(self) -> None:
        """Stop every worker and remove what the backend created."""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


SANDBOXES: Registry[Sandbox] = Registry(
    "sandbox", tuple(f"testtime.sandbox.{m}" for m in ("docker_backend", "bwrap_backend"))
)


def harness_failed(tests: Sequence[TestCase], done: list[TestVerdict], reason: str) -> list[TestVerdict]:
    """Verdicts for a job whose harness failed mid-job: what the program did to it is its runtime error."""
    verdict = TestVerdict(verdict="runtime_error", error=f"the sandbox harness failed during this job: {reason}"[:500])
    return [*done, *[verdict] * max(len(tests) - len(done), 1)][: max(len(tests), 1)]


def timed_out(tests: Sequence[TestCase], limits: Limits) -> list[TestVerdict]:
    """Verdicts for a job whose worker stopped answering: the program ran out of time."""
    verdict = TestVerdict(verdict="time_limit", seconds=limits.timeout_s, error="no answer within the job's bound")
    return [verdict] * (1 if limits.early_exit else max(len(tests), 1))
