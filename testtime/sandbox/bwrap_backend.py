"""`bwrap`: bubblewrap workers, each a resident harness as PID 1 of fresh namespaces, over stdin/stdout.

Limits beyond the harness's rlimits come from cgroup v1 (memory, pids) when the host lets us create groups;
`testtime sandbox check` reports whether it does. Without them a fork bomb is bounded only by the per-test
wall time and the kill of leftovers, which is weaker: prefer Docker where an engine answers.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from testtime.sandbox import SANDBOXES, SandboxError
from testtime.sandbox.pool import HARNESS_SOURCE, PooledSandbox, Worker

CGROUP_V1 = Path("/sys/fs/cgroup")


def bwrap_command(python: str) -> list[str]:
    command = [
        "bwrap",
        "--unshare-all",
        "--unshare-user",
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
    return all(os.access(CGROUP_V1 / c, os.W_OK) for c in ("memory", "pids"))


class _BwrapWorker(Worker):
    def __init__(self, python: str, memory_mb: int, pids: int) -> None:
        self.groups: list[Path] = []
        command = bwrap_command(python)
        if cgroups_available():
            name = f"testtime-{uuid.uuid4().hex[:12]}"
            memory, pid_group = CGROUP_V1 / "memory" / name, CGROUP_V1 / "pids" / name
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
            text=True,
            env={"PATH": "/usr/bin:/bin"},
        )
        if self.receive(30) != "ready":
            error = self.process.stderr.read() if self.process.poll() is not None and self.process.stderr else ""
            self.destroy()
            raise SandboxError(f"bubblewrap worker did not start: {error.strip()[-300:] or 'no answer in 30 s'}")

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def receive(self, timeout_s: float) -> str | None:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout_s)
        if not ready:
            return None
        return self.process.stdout.readline().strip() or None

    def destroy(self) -> None:
        self.process.kill()
        self.process.wait()
        for group in self.groups:
            for _ in range(50):  # the kernel empties a group a moment after its last process exits
                try:
                    group.rmdir()
                    break
                except OSError:
                    time.sleep(0.01)


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

    def start(self) -> None:
        if shutil.which("bwrap") is None:
            raise SandboxError("bubblewrap is not installed: apt-get install bubblewrap (or use --sandbox docker)")
        super().start()

    def _spawn(self) -> Worker:
        return _BwrapWorker(self.python, self.memory_mb, self.pids)
