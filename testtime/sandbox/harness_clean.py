"""In-sandbox cleanup between jobs: what a program can leave behind, and how the supervisor removes it.

Standalone (stdlib only); it travels into the sandbox with `harness_job.py` and `harness.py` as one source.
Run only by the supervisor as PID 1 of a sandbox: leftover processes (detached daemons included) are killed
and reaped, the scratch folders are emptied whatever the program made of them (modes of 000, trees thousands
of levels deep, symlink loops: the wipe is iterative, never follows a link and never builds a long path), the
kernel keyrings a job could write are cleared, and SysV IPC objects, which outlive their processes, are
counted so a worker that has any is replaced, as is one whose supervisor or zygote a program changed (its
limits, priority or CPUs). Also here: what the supervisor accepts as a job's report.
"""

import json
import os
import signal
import stat
import time

SCRATCH = ("/tmp", "/dev/shm", "/dev/mqueue")  # everything a program can write; wiped after every job


def _processes(spare):
    """(pid, process group, state) of every process in this pid namespace but `spare`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) not in spare:
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
        others = _processes(spare)
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


def _unlink_tree(root_fd, name):
    """Remove `name` (in the folder open as `root_fd`) and everything under it, iteratively: each directory's
    subdirectories are moved up beside it before it is emptied, so no path grows and no descriptor piles up."""
    pending = [name]
    while pending:
        current = pending.pop()
        if not stat.S_ISDIR(os.lstat(current, dir_fd=root_fd).st_mode):
            os.unlink(current, dir_fd=root_fd)
            continue
        os.chmod(current, 0o700, dir_fd=root_fd)  # the program may have set 000 (we own all it made)
        fd = os.open(current, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=root_fd)
        try:
            for child in os.listdir(fd):
                if stat.S_ISDIR(os.lstat(child, dir_fd=fd).st_mode):
                    os.chmod(child, 0o700, dir_fd=fd)
                    moved = f".wipe-{len(pending)}-{time.monotonic_ns()}"
                    os.rename(child, moved, src_dir_fd=fd, dst_dir_fd=root_fd)
                    pending.append(moved)
                else:
                    os.unlink(child, dir_fd=fd)
        finally:
            os.close(fd)
        os.rmdir(current, dir_fd=root_fd)


def wipe(folder):
    """Empty a scratch folder; True when it is verifiably empty afterwards."""
    try:
        root_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        for name in os.listdir(root_fd):
            try:
                _unlink_tree(root_fd, name)
            except OSError:
                pass  # verified below
        return not os.listdir(root_fd)
    except OSError:
        return False
    finally:
        os.close(root_fd)


KEYCTL_SYSCALL = {"x86_64": 250, "aarch64": 219}  # keyctl(2) has no libc wrapper in the standard library


def _syscall():
    """libc's syscall(2) and keyctl's number, loaded once before any fork (a load per call cost 30 us)."""
    number = KEYCTL_SYSCALL.get(os.uname().machine)
    if number is None:
        return None
    import ctypes

    return number, ctypes.CDLL(None, use_errno=True).syscall, ctypes.c_long


_SYSCALL = _syscall()


def _keyctl(*args):
    if _SYSCALL is None:
        return -1
    number, syscall, c_long = _SYSCALL
    return syscall(number, *(c_long(a) for a in args))


def new_session_keyring():
    """A job process's own anonymous session keyring (KEYCTL_JOIN_SESSION_KEYRING, no name): what it adds
    there dies with it. Fails harmlessly where keyctl is filtered (Docker's seccomp profile)."""
    _keyctl(1, 0)


# keyctl(2) operations and the rings every job of this uid shares and which outlive it: the user and
# user-session keyrings, and the persistent one (a job's own session keyring dies with it)
KEYCTL_SETPERM, KEYCTL_CLEAR, KEYCTL_READ, KEYCTL_GET_PERSISTENT = 5, 7, 11, 22
USER_KEYRING, USER_SESSION_KEYRING = -4, -5
OWNER_ALL = 0x3F3F0000  # possessor and user: every permission (what the kernel gives a new user keyring)


def clear_keyrings():
    """Empty every keyring a later job could reach: each one's permissions put back first (a job that stripped
    write from @u once made the clear fail silently, and the next job read its key), then cleared, then read
    back. Returns whether all are empty; False (a ring that would not clear, or a key left) replaces the
    worker: a new sandbox is a new user namespace, with keyrings of its own. Where keyctl is filtered (Docker's
    seccomp profile) no ring is reachable: True."""
    if _SYSCALL is None or _keyctl(0, USER_KEYRING, 0) < 0:  # KEYCTL_GET_KEYRING_ID: keyctl not allowed here
        return True
    for ring in (USER_KEYRING, USER_SESSION_KEYRING):
        _keyctl(KEYCTL_SETPERM, ring, OWNER_ALL)
    # linked into @u to reach it (never into the harness's own session keyring), unlinked when @u is cleared
    persistent = _keyctl(KEYCTL_GET_PERSISTENT, -1, USER_KEYRING)
    rings = ([persistent] if persistent >= 0 else []) + [USER_KEYRING, USER_SESSION_KEYRING]
    empty = True
    for ring in rings:
        _keyctl(KEYCTL_SETPERM, ring, OWNER_ALL)
        _keyctl(KEYCTL_CLEAR, ring)  # may be refused (the persistent ring is not always ours to clear): what counts
        empty = empty and _keyctl(KEYCTL_READ, ring, 0, 0) == 0  # is that it holds nothing (-1: unreadable)
    return empty


REPORT_STATUSES = ("ok", "runtime_error", "time_limit", "memory_limit", "output_limit", "compile_error")
REPORT_KEYS = {"index", "status", "seconds", "error", "stdout", "result"}
MAX_REPORT_BYTES = 8 << 20  # a report carries at most the output cap (1 MiB) and its error: far below this


def checked_report(line, index):
    """A job's report line as the supervisor accepts it: exactly the fields the job process writes, of their
    types, for the test it is running; None for anything else (the program wrote to the report channel)."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(record, dict) or set(record) != REPORT_KEYS:
        return None
    seconds = record["seconds"]
    if (
        record["index"] != index
        or isinstance(record["index"], bool)
        or record["status"] not in REPORT_STATUSES
        or isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not 0 <= seconds < 1e6
        or not isinstance(record["stdout"], str)
        or not (record["error"] is None or isinstance(record["error"], str))
        or not (record["result"] is None or isinstance(record["result"], str))
    ):
        return None
    return record


def _read_proc(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 8192)
    finally:
        os.close(fd)


def inherited_settings(pid):
    """What a process of the job's uid can change for good in another (prlimit, setpriority,
    sched_setscheduler, sched_setaffinity, ioprio_set need no privilege then) and a forked process inherits: the
    resource limits, nice value, scheduling policy, CPU affinity and I/O priority of `pid`; None once it is gone.
    Changed in the zygote, they would reach every later job's processes (a hard limit lowered below what a job
    sets kills each job process); in the supervisor, its own bounds."""
    try:
        fields = _read_proc(f"/proc/{pid}/stat").rpartition(b")")[2].split()
        cpus = frozenset(os.sched_getaffinity(pid))
        return _read_proc(f"/proc/{pid}/limits"), fields[16], fields[38], cpus, _io_priority(pid)
    except (OSError, IndexError):
        return None


IOPRIO_GET = {"x86_64": 252, "aarch64": 31}


def _io_priority(pid):
    """ioprio_get(IOPRIO_WHO_PROCESS, pid): a job could set the zygote's I/O class to idle (once inherited by
    every later job of the worker, on both backends)."""
    number = IOPRIO_GET.get(os.uname().machine)
    if number is None or _SYSCALL is None:
        return None
    return _SYSCALL[1](number, 1, pid)


def sysv_objects():
    """Whether any SysV shared memory, semaphore or message queue is alive in this IPC namespace (they outlive
    processes). Raw reads: a file object per listing cost the cleanup as much as the check."""
    for kind in ("shm", "sem", "msg"):
        try:
            if _read_proc(f"/proc/sysvipc/{kind}").partition(b"\n")[2].strip():  # anything below the header
                return True
        except OSError:
            continue
    return False
