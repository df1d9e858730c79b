"""Per-worker cgroups for the bwrap backend: memory, pids and CPU bounds that a program's processes cannot leave.

A process that calls `setsid` leaves its process group and session, never its cgroup: every process a job
starts is counted against its worker's group, so a fork of spinning children gets the worker's CPU share
(`cpus`, as Docker's `--cpus`) and a neighbouring worker's verdicts do not change. cgroup v2 (the unified
hierarchy mounted at /sys/fs/cgroup) is used where the host has it, else cgroup v1's memory, pids and cpu
controllers. Where neither can be written (an unprivileged user, a container without delegation) there is
no bound; `testtime sandbox check` says so, and its probes show it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from testtime.sandbox.owner import CGROUP_ROOT, remove_cgroup

V1_CONTROLLERS = ("memory", "pids", "cpu")
V2_CONTROLLERS = ("memory", "pids", "cpu")
CPU_PERIOD_US = 100_000

Hierarchy = Literal["v2", "v1"]


def hierarchy(root: Path = CGROUP_ROOT) -> Hierarchy | None:
    """Which cgroup hierarchy this process can make worker groups in, if any."""
    controllers = root / "cgroup.controllers"
    if controllers.exists():
        available = set(controllers.read_text().split())
        return "v2" if set(V2_CONTROLLERS) <= available and os.access(root, os.W_OK) else None
    return "v1" if all(os.access(root / c, os.W_OK) for c in V1_CONTROLLERS) else None


def _enable_v2_controllers(root: Path) -> bool:
    """Let the root's children use the controllers (a no-op where they already may)."""
    control = root / "cgroup.subtree_control"
    enabled = set(control.read_text().split())
    missing = [c for c in V2_CONTROLLERS if c not in enabled]
    if missing:
        try:
            control.write_text(" ".join(f"+{c}" for c in missing))
        except OSError:
            return False
    return True


def create_groups(name: str, memory_mb: int, pids: int, cpus: float | None, root: Path = CGROUP_ROOT) -> list[Path]:
    """The groups one worker joins (one on v2, one per controller on v1), limits written (`cpus` None: no CPU
    limit); [] where none can be. A group that cannot be fully set up is removed again: a worker never runs
    half-bounded without saying so."""
    kind = hierarchy(root)
    quota = "max" if cpus is None else str(max(1000, int(cpus * CPU_PERIOD_US)))
    made: list[Path] = []
    try:
        if kind == "v2" and _enable_v2_controllers(root):
            group = root / name
            group.mkdir()
            made.append(group)
            (group / "memory.max").write_text(str(memory_mb << 20))
            if (group / "memory.swap.max").exists():  # absent where swap accounting is off
                (group / "memory.swap.max").write_text("0")
            (group / "pids.max").write_text(str(pids))
            (group / "cpu.max").write_text(f"{quota} {CPU_PERIOD_US}")
        elif kind == "v1":
            for controller in V1_CONTROLLERS:
                group = root / controller / name
                group.mkdir()
                made.append(group)
            memory, pid_group, cpu = made
            (memory / "memory.limit_in_bytes").write_text(str(memory_mb << 20))
            (pid_group / "pids.max").write_text(str(pids))
            (cpu / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
            (cpu / "cpu.cfs_quota_us").write_text("-1" if cpus is None else quota)
    except OSError:
        for group in made:
            remove_cgroup(group)
        return []
    return made


def join_command(groups: list[Path], command: list[str]) -> list[str]:
    """`command` started from a shell that first moves itself into every group, so all it starts is inside."""
    if not groups:
        return command
    script = (
        'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1/cgroup.procs" || exit 97; shift; n=$((n-1)); done; '
        'exec "$@"'
    )
    return ["sh", "-c", script, "sh", str(len(groups)), *map(str, groups), *command]
