"""In-sandbox cleanup between jobs: what a program can leave behind, and how the supervisor removes it.

Standalone (stdlib only); it travels into the sandbox with `harness_job.py` and `harness.py` as one source.
Run only by the supervisor as PID 1 of a sandbox: leftover processes (detached daemons included) are killed
and reaped, the scratch folders are emptied whatever modes the program set, and SysV IPC objects, which
outlive their processes, are counted so a worker that has any is replaced.
"""

import os
import signal
import stat
import time

SCRATCH = ("/tmp", "/dev/shm", "/dev/mqueue")  # everything a program can write; wiped after every job


def _processes():
    """(pid, process group, state) of every process in this pid namespace."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat_file:
                    fields = stat_file.read().rpartition(")")[2].split()
                found.append((int(entry), int(fields[2]), fields[0]))
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
    return found


def kill_leftovers(spare, job_groups):
    """As PID 1 of a pid namespace, kill and reap every process but `spare` until none is left (a process may
    fork while the sweep runs; its orphans come back to PID 1). True when a live process outside the finished
    jobs' process groups was found: something left behind on purpose (a detached daemon)."""
    left_behind, deadline = False, time.monotonic() + 5.0
    while time.monotonic() < deadline:
        others = [(pid, group, state) for pid, group, state in _processes() if pid not in spare]
        if not others:
            break
        for pid, group, state in others:
            left_behind = left_behind or (state != "Z" and group not in job_groups)
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        time.sleep(0.001)
    return left_behind


def _remove(path):
    """Delete a file or a tree the program left, whatever modes it set (we own everything it made)."""
    if stat.S_ISDIR(os.lstat(path).st_mode):
        os.chmod(path, 0o700)
        for name in os.listdir(path):
            _remove(os.path.join(path, name))
        os.rmdir(path)
    else:
        os.unlink(path)


def wipe(folder):
    """Empty a scratch folder; True when it is verifiably empty afterwards."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    for name in names:
        try:
            _remove(os.path.join(folder, name))
        except OSError:
            pass  # verified below
    try:
        return not os.listdir(folder)
    except OSError:
        return False


def sysv_objects():
    """SysV shared memory, semaphores and message queues alive in this IPC namespace (they outlive processes)."""
    count = 0
    for kind in ("shm", "sem", "msg"):
        try:
            with open(f"/proc/sysvipc/{kind}") as listing:
                count += max(0, len(listing.read().strip().splitlines()) - 1)
        except OSError:
            continue
    return count
