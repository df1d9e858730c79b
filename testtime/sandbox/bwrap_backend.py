"""`bwrap`: bubblewrap workers, each a resident harness as PID 1 of fresh namespaces, over stdin/stdout.

Writable: only `/tmp` and `/dev/shm`, tmpfs capped at the size Docker's are, wiped after every job; `/dev`,
`/proc/sys` and the root are read-only, and nested user namespaces are disabled (`--disable-userns`). A
system-call filter (`syscall_filter.py`: Docker's default profile, with io_uring and ptrace refused too) is
loaded by bwrap just before the harness starts, so every job runs under it.
As root, bwrap is started as the unprivileged host user 65534 (`setpriv`): inside a user namespace made by
root, the sandbox's uid maps to host root, which owns `/proc/sys` and `/proc/sysrq-trigger` and could write
them (drop the host's caches, set its core_pattern). Started unprivileged, every host `/proc` file a program
reaches is checked against an unprivileged host uid.
Memory, pids and CPU bounds come from a cgroup per worker (`cgroups.py`; v2 or v1) when the host lets us
create groups; `testtime sandbox check` reports whether it does. Without them the harness bounds the jobs'
CPU itself (`harness_throttle.py`, coarser), and a fork bomb is bounded only by the per-test wall time and
the kill of leftovers: prefer Docker where an engine answers. Cgroups are named after their owner
(`owner.py`); a starting pool reaps those of dead owners.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from testtime.sandbox import SANDBOXES, SCRATCH_MB, Limits, SandboxError
from testtime.sandbox.cgroups import create_groups, hierarchy, join_command
from testtime.sandbox.owner import CGROUP_PREFIX, local_tag, reap, remove_cgroup
from testtime.sandbox.pool import HARNESS_SOURCE, PooledSandbox, Worker
from testtime.sandbox.syscall_filter import bpf_program

SCRATCH_BYTES = str(SCRATCH_MB << 20)
UNPRIVILEGED = "65534"  # nobody: the host user a root-started sandbox runs as


def bwrap_command(python: str, harness_args: tuple[str, ...] = (), seccomp_fd: int | None = None) -> list[str]:
    """The worker's bwrap command line; `seccomp_fd`: a descriptor holding the system-call filter it loads
    (`syscall_filter.py`) just before the harness starts."""
    command = [
        "bwrap",
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--uid",
        "65534",
        "--gid",
        "65534",
        "--die-with-parent",
        "--new-session",
        "--as-pid-1",
        "--ro-bind",
        "/usr",
        "/usr",
        # Debian resolves some libraries (numpy's BLAS) through /etc/alternatives symlinks: only those.
        "--ro-bind-try",
        "/etc/alternatives",
        "/etc/alternatives",
        "--symlink",
        "usr/lib",
        "/lib",
        "--symlink",
        "usr/lib64",
        "/lib64",
        "--symlink",
        "usr/bin",
        "/bin",
        "--proc",
        "/proc",
        # Read-only kernel settings, as Docker's: else a job could change the worker's IPC and UTS namespaces'
        # (kernel.shmmax, fs.mqueue) for the jobs after it. The host's values show through, read-only.
        "--ro-bind",
        "/proc/sys",
        "/proc/sys",
        "--dev",
        "/dev",
        "--size",
        SCRATCH_BYTES,
        "--tmpfs",
        "/dev/shm",
        # POSIX message queues live in the IPC namespace, which every job of a worker shares: mounted, they are
        # files that the cleanup removes with the rest of the scratch space.
        "--mqueue",
        "/dev/mqueue",
        "--remount-ro",
        "/dev",
        "--size",
        SCRATCH_BYTES,
        "--tmpfs",
        "/tmp",
        "--chdir",
        "/tmp",
        "--clearenv",
        "--setenv",
        "PATH",
        "/usr/bin",
        "--cap-drop",
        "ALL",
    ]
    if seccomp_fd is not None:
        command += ["--seccomp", str(seccomp_fd)]
    prefix = Path(python).resolve().parents[1]
    if not str(prefix).startswith("/usr"):
        command += ["--ro-bind", str(prefix), str(prefix)]  # an interpreter outside /usr (pyenv, conda)
    # bwrap's root is its own tmpfs: make it read-only too (the /tmp mount stays writable).
    return [*command, "--remount-ro", "/", python, "-c", HARNESS_SOURCE, *harness_args]


def sandbox_python() -> str:
    """The system interpreter when there is one (it needs only /usr), else this one."""
    return "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def cgroups_available() -> bool:
    return hierarchy() is not None


def unprivileged(command: list[str]) -> list[str]:
    """As root, `command` run as the host's unprivileged user; otherwise unchanged."""
    if os.geteuid() != 0:
        return command
    if shutil.which("setpriv") is None:
        raise SandboxError("running bwrap as root needs setpriv (apt-get install util-linux) to drop to uid 65534")
    return ["setpriv", "--reuid", UNPRIVILEGED, "--regid", UNPRIVILEGED, "--clear-groups", *command]


def _filter_descriptor() -> int:
    """A descriptor at the start of the compiled system-call filter, for one worker's bwrap to read."""
    program = bpf_program()
    descriptor = os.memfd_create("testtime-seccomp", 0)
    os.write(descriptor, program)
    os.lseek(descriptor, 0, os.SEEK_SET)
    return descriptor


class _BwrapWorker(Worker):
    def __init__(self, python: str, memory_mb: int, pids: int, cpus: float | None) -> None:
        super().__init__()
        self.groups = create_groups(f"{CGROUP_PREFIX}{local_tag()}-{uuid.uuid4().hex[:8]}", memory_mb, pids, cpus)
        self.came_up = False
        # Without a cgroup the harness itself bounds the jobs' CPU (harness_throttle.py).
        throttle = ("--cpus", str(cpus)) if cpus is not None and not self.groups else ()
        rules = _filter_descriptor()
        try:
            # The groups are joined (as root) before privileges drop and bwrap starts: all it starts is inside them.
            command = join_command(self.groups, unprivileged(bwrap_command(python, throttle, rules)))
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
                env={"PATH": "/usr/bin:/bin"},
                pass_fds=(rules,),
            )
        finally:
            os.close(rules)  # bwrap has read it (or holds its own copy) by the time it runs anything
        assert self.process.stdin is not None and self.process.stdout is not None
        self.write_fd, self.read_fd = self.process.stdin.fileno(), self.process.stdout.fileno()

    def await_ready(self) -> list[str] | None:
        """As a worker's; one that never came up says why bwrap failed (a worker that served before and then
        died is replaced by the pool like any other)."""
        reasons = super().await_ready()
        if reasons is not None:
            self.came_up = True
        elif not self.came_up and self.process.poll() is not None and self.process.stderr is not None:
            error = self.process.stderr.read().decode(errors="replace").strip()[-300:]
            hint = " (as uid 65534: does this host allow unprivileged user namespaces?)" if os.geteuid() == 0 else ""
            raise SandboxError(f"bubblewrap worker did not start{hint}: {error or 'it exited'}")
        return reasons

    def destroy(self) -> None:
        self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        for group in self.groups:
            remove_cgroup(group)


@SANDBOXES.register("bwrap", help="bubblewrap namespaces + rlimits (+ cgroup memory/pids/CPU limits where available)")
class BwrapSandbox(PooledSandbox):
    name = "bwrap"

    def __init__(self, pool_size: int = 2, memory_mb: int = 1536, pids: int = 64, cpus: float | None = 1.0) -> None:
        """`cpus`: each worker's CPU share (None: unbounded), by its cgroup, else by the harness's throttle."""
        super().__init__(pool_size)
        self.memory_mb, self.pids, self.cpus = memory_mb, pids, cpus
        self.python = sandbox_python()
        # bwrap --die-with-parent kills a worker when the *thread* that started it ends (PR_SET_PDEATHSIG follows
        # the thread, not the process): a worker replaced inside `arun` (an executor thread) died with that
        # executor, at the end of an asyncio.run. Every worker starts from this one thread, alive until close.
        self._spawner: ThreadPoolExecutor | None = None

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "memory_mb": self.memory_mb,
            "pids": self.pids,
            "cpus": self.cpus,
            "cgroups": cgroups_available(),
            "python": self.python,
        }

    def program_memory_mb(self, limits: Limits) -> int | None:
        # Without a memory cgroup nothing else bounds a program: it gets the worker's size as its own cap.
        return limits.memory_mb if limits.memory_mb is not None or cgroups_available() else self.memory_mb

    def start(self) -> None:
        if self._started:
            return  # every job calls this: a search of PATH per job cost the host 0.18 ms of its ~0.5
        if shutil.which("bwrap") is None:
            raise SandboxError("bubblewrap is not installed: apt-get install bubblewrap (or use --sandbox docker)")
        reap()  # cgroups and folders of runs that were killed
        super().start()

    def _spawn(self) -> Worker:
        if self._spawner is None:
            self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bwrap-spawner")
        return self._spawner.submit(_BwrapWorker, self.python, self.memory_mb, self.pids, self.cpus).result()

    def close(self) -> None:
        super().close()
        if self._spawner is not None:
            self._spawner.shutdown()
            self._spawner = None
