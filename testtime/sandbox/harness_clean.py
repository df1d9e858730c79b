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


def clear_keyrings():
    """Empty the user and user-session keyrings (KEYCTL_CLEAR on @u and @us), which every job of this uid
    shares and which outlive the job; a job's own session keyring went with it."""
    for ring in (-4, -5):
        _keyctl(7, ring)


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
    sched_setscheduler, sched_setaffinity need no privilege then) and a forked process inherits: the resource
    limits, nice value, scheduling policy and CPU affinity of `pid`; None once it is gone. Changed in the
    zygote, they would reach every later job's processes (a hard limit lowered below what a job sets kills each
    job process); in the supervisor, its own bounds."""
    try:
        fields = _read_proc(f"/proc/{pid}/stat").rpartition(b")")[2].split()
        return _read_proc(f"/proc/{pid}/limits"), fields[16], fields[38], frozenset(os.sched_getaffinity(pid))
    except (OSError, IndexError):
        return None


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
