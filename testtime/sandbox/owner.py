"""Who owns a sandbox resource, and the leftovers of owners that are gone.

Containers, cgroups and temp folders carry their creator's identity: host name, pid and the process's start
time (so a recycled pid is not mistaken for the owner). A killed run (`kill -9`) cannot clean up; the next
sandbox that starts reaps what belongs to owners that no longer exist, `testtime sandbox check` lists
leftovers, and `testtime sandbox clean` removes them. Resources of a live owner are never touched unless
asked for (`clean --all`); those from another host or an older version without an owner are "unknown".
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

CONTAINER_LABEL = "testtime.sandbox"
OWNER_LABEL = "testtime.owner"
FOLDER_PREFIX = "testtime-sandbox-"
CGROUP_PREFIX = "testtime-"
CGROUP_ROOT = Path("/sys/fs/cgroup")
_LOCAL_NAME = re.compile(r"^(\d+)-(\d+)-")  # "<pid>-<start ticks>-..." after the prefix

State = Literal["dead", "live", "unknown"]


def start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat); None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[19])


def local_tag() -> str:
    """This process as it names local resources: "<pid>-<start ticks>"."""
    return f"{os.getpid()}-{start_ticks(os.getpid())}"


def owner_id() -> str:
    """This process as it labels containers (a Docker engine may serve several hosts)."""
    return f"{socket.gethostname()}:{local_tag()}"


def _state(pid: int, ticks: int) -> State:
    return "live" if start_ticks(pid) == ticks else "dead"


def owner_state(owner: str | None) -> State:
    if not owner:
        return "unknown"
    host, _, tag = owner.rpartition(":")
    match = _LOCAL_NAME.match(tag + "-")
    if host != socket.gethostname() or match is None:
        return "unknown"
    return _state(int(match.group(1)), int(match.group(2)))


def _local_state(name: str) -> State:
    match = _LOCAL_NAME.match(name)
    return _state(int(match.group(1)), int(match.group(2))) if match else "unknown"


def _pid_of(tag: str) -> int | None:
    match = _LOCAL_NAME.match(tag)
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class Leftover:
    kind: Literal["container", "cgroup", "folder"]
    name: str
    state: State
    pid: int | None = None  # the owner's pid where the resource names one (so a check can look at its own only)

    def describe(self) -> str:
        return f"{self.kind} {self.name} (owner {self.state})"


def containers(client: Any) -> list[tuple[Leftover, Any]]:
    # another run's sandbox may remove its containers between the listing and their inspection
    found = client.containers.list(all=True, filters={"label": CONTAINER_LABEL}, ignore_removed=True)
    return [
        (Leftover("container", c.name, owner_state(owner), _pid_of((owner or "").rpartition(":")[2] + "-")), c)
        for c in found
        for owner in [c.labels.get(OWNER_LABEL)]
    ]


def folders() -> list[Leftover]:
    root = Path(tempfile.gettempdir())
    return [
        Leftover("folder", str(p), _local_state(tag), _pid_of(tag))
        for p in root.glob(f"{FOLDER_PREFIX}*")
        for tag in [p.name.removeprefix(FOLDER_PREFIX)]
        if p.is_dir()
    ]


def cgroups() -> list[Leftover]:
    found = []
    # v1 controllers' folders, and the unified (v2) root itself
    for folder in (CGROUP_ROOT / "memory", CGROUP_ROOT / "pids", CGROUP_ROOT / "cpu", CGROUP_ROOT):
        for group in folder.glob(f"{CGROUP_PREFIX}*"):
            tag = group.name.removeprefix(CGROUP_PREFIX)
            found.append(Leftover("cgroup", str(group), _local_state(tag), _pid_of(tag)))
    return found


def leftovers(client: Any = None) -> list[Leftover]:
    """Every sandbox resource on this machine (and its Docker engine, given a client) with its owner's state."""
    found = folders() + cgroups()
    if client is not None:
        found += [leftover for leftover, _ in containers(client)]
    return found


def remove_cgroup(group: Path) -> None:
    """Kill whatever still runs in the group, then remove it (the kernel empties it a moment later)."""
    try:
        for pid in (group / "cgroup.procs").read_text().split():
            try:
                os.kill(int(pid), 9)
            except OSError:
                continue
    except OSError:
        return
    for _ in range(100):
        try:
            group.rmdir()
            return
        except OSError:
            time.sleep(0.01)


def reap(client: Any = None, states: tuple[State, ...] = ("dead",)) -> list[Leftover]:
    """Remove the leftovers whose owner's state is in `states`; returns what was removed."""
    removed = []
    if client is not None:
        for leftover, container in containers(client):
            if leftover.state in states:
                try:
                    container.remove(force=True)
                    removed.append(leftover)
                except Exception:  # noqa: BLE001 - gone meanwhile, or removal already under way
                    continue
    for leftover in folders() + cgroups():
        if leftover.state in states:
            if leftover.kind == "folder":
                shutil.rmtree(leftover.name, ignore_errors=True)
            else:
                remove_cgroup(Path(leftover.name))
            removed.append(leftover)
    return removed
