"""`bwrap`: bubblewrap workers, each a resident harness as PID 1 of fresh namespaces, over stdin/stdout.

Writable: only `/tmp` and `/dev/shm`, tmpfs capped at the size Docker's are, wiped after every job; `/dev`
itself and the root are read-only, and nested user namespaces are disabled (`--disable-userns`).
Limits beyond the harness's rlimits come from cgroup v1 (memory, pids) when the host lets us create groups;
`testtime sandbox check` reports whether it does. Without them a fork bomb is bounded only by the per-test
wall time and the kill of leftovers, which is weaker: prefer Docker where an engine answers. Cgroups are
named after their owner (`owner.py`); a starting pool reaps those of dead owners.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from testtime.sandbox import SANDBOXES, SCRATCH_MB, Limits, SandboxError
from testtime.sandbox.owner import CGROUP_PREFIX, CGROUP_ROOT, local_tag, reap, remove_cgroup
from testtime.sandbox.pool import HARNESS_SOURCE, PooledSandbox, Worker

SCRATCH_BYTES = str(SCRATCH_MB << 20)


def bwrap_command(python: str) -> list[str]:
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
    prefix = Path(python).resolve().parents[1]
    if not str(prefix).startswith("/usr"):
        command += ["--ro-bind", str(prefix), str(prefix)]  # an interpreter outside /usr (pyenv, conda)
    # bwrap's root is its own tmpfs: make it read-only too (the /tmp mount stays writable).
    return [*command, "--remount-ro", "/", python, "-c", HARNESS_SOURCE]


def sandbox_python() -> str:
    """The system interpreter when there is one (it needs only /usr), else this one."""
    return "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable


def cgroups_available() -> bool:
    return all(os.access(CGROUP_ROOT / c, os.W_OK) for c in ("memory", "pids"))


class _BwrapWorker(Worker):
    def __init__(self, python: str, memory_mb: int, pids: int) -> None:
        super().__init__()
        self.groups: list[Path] = []
        command = bwrap_command(python)
        if cgroups_available():
            name = f"{CGROUP_PREFIX}{local_tag()}-{uuid.uuid4().hex[:8]}"
            memory, pid_group = CGROUP_ROOT / "memory" / name, CGROUP_ROOT / "pids" / name
            for group in (memory, pid_group):
                group.mkdir()
                self.groups.append(group)
            (memory / "memory.limit_in_bytes").write_text(str(memory_mb << 20))
            (pid_group / "pids.max").write_text(str(pids))
            # Join the groups before exec'ing bwrap, so everything it starts is inside them.
            command = [
                "sh",
                "-c",
                'echo $$ > "$1/cgroup.procs" && echo $$ > "$2/cgroup.procs" && shift 2 && exec "$@"',
                "sh",
                str(memory),
                str(pid_group),
                *command,
            ]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            env={"PATH": "/usr/bin:/bin"},
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.write_fd, self.read_fd = self.process.stdin.fileno(), self.process.stdout.fileno()

    def await_ready(self) -> list[str] | None:
        reasons = super().await_ready()
        if reasons is None and self.process.poll() is not None and self.process.stderr is not None:
            error = self.process.stderr.read().decode(errors="replace").strip()[-300:]
            raise SandboxError(f"bubblewrap worker did not start: {error or 'it exited'}")
        return reasons

    def destroy(self) -> None:
        self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        for group in self.groups:
            remove_cgroup(group)


@SANDBOXES.register("bwrap", help="bubblewrap namespaces + rlimits (+ cgroup v1 limits where available)")
class BwrapSandbox(PooledSandbox):
    name = "bwrap"

    def __init__(self, pool_size: int = 2, memory_mb: int = 1536, pids: int = 64) -> None:
        super().__init__(pool_size)
        self.memory_mb, self.pids = memory_mb, pids
        self.python = sandbox_python()

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "memory_mb": self.memory_mb,
            "pids": self.pids,
            "cgroups": cgroups_available(),
            "python": self.python,
        }

    def program_memory_mb(self, limits: Limits) -> int | None:
        # Without a memory cgroup nothing else bounds a program: it gets the worker's size as its own cap.
        return limits.memory_mb if limits.memory_mb is not None or cgroups_available() else self.memory_mb

    def start(self) -> None:
        if shutil.which("bwrap") is None:
            raise SandboxError("bubblewrap is not installed: apt-get install bubblewrap (or use --sandbox docker)")
        if not self._started:
            reap()  # cgroups and folders of runs that were killed
        super().start()

    def _spawn(self) -> Worker:
        return _BwrapWorker(self.python, self.memory_mb, self.pids)
