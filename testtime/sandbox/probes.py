"""Isolation probes: small hostile programs and the outcome that proves a property holds.

`testtime sandbox check` runs them on every available backend and prints what holds; the test suite runs
each one on each backend as its own test. A probe with `before` runs that program first on the same worker
(a pool of one): it tries to leave something behind for the probe to find.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from testtime.core.records import TestCase
from testtime.sandbox import SCRATCH_MB, ExecutionReport, Limits, Sandbox
from testtime.sandbox.probe_programs import (
    BLOCKING_REPORT,
    CLEAN_SLATE,
    CPU_HOG_CHILDREN,
    DAEMON,
    DEEP_TREE,
    EXPECTED_PREFIX,
    FILL_SCRATCH,
    FLOOD_REPORT,
    FORGED_REPORT,
    GARBAGE_REPORT,
    HARNESS_CPUS_INTACT,
    HARNESS_IO_PRIORITY_INTACT,
    HARNESS_LIMITS_INTACT,
    HARNESS_PRIORITY_INTACT,
    HOST_KERNEL_SETTINGS,
    HUNT_EXPECTED_OUTPUT,
    IO_URING,
    IOPRIO,
    KEYCTL,
    KEYRING_KEY,
    LOWER_HARNESS_IO_PRIORITY,
    LOWER_HARNESS_LIMITS,
    LOWER_HARNESS_PRIORITY,
    MQUEUE,
    NARROW_HARNESS_CPUS,
    NO_DAEMON,
    NO_KEYRING_KEY,
    NO_MQUEUE,
    NO_NUDGE,
    NO_SYSV,
    NOTHING_ELSE_WRITABLE,
    STOP_ZYGOTE,
    SYSCALL_FILTERED,
    SYSV,
    TRACE_ANOTHER,
)

SECRET_VARIABLE = "TESTTIME_PROBE_SECRET"
# An expected output no program can know: it has the shape the hunter looks for, and is random.
HIDDEN_OUTPUT = EXPECTED_PREFIX + uuid.uuid4().hex


@dataclass(frozen=True)
class Probe:
    name: str
    program: str
    check: Callable[[ExecutionReport], bool]
    limits: Limits = Limits(timeout_s=2.0)  # noqa: RUF009 - Limits is frozen, so sharing one default is safe
    expected_output: str = "ok"
    before: str | None = None


def _ok(report: ExecutionReport) -> bool:
    return report.passed


def _ok_before_the_deadline(report: ExecutionReport) -> bool:
    """Passed, and not by waiting out the supervisor's deadline (the time limit and a second) first."""
    return report.passed and report.seconds < 2.0  # the probes' time limit


def _verdict(verdict: str) -> Callable[[ExecutionReport], bool]:
    return lambda report: [t.verdict for t in report.tests] == [verdict]


def host_marker() -> Path:
    """A file on the host holding a secret; no sandbox may read it."""
    marker = Path("/var/tmp") / "testtime-probe-marker"
    if not marker.exists():
        marker.write_text(uuid.uuid4().hex)
    return marker


PROBES = [
    Probe(
        "network unreachable",
        "import socket\nfor host in ('1.1.1.1', '8.8.8.8', '10.0.0.1'):\n"
        "    try:\n        socket.create_connection((host, 53), timeout=1); print('reached', host); break\n"
        "    except OSError: pass\nelse: print('ok')",
        _ok,
    ),
    Probe(
        "host files unreadable",
        f"try:\n    open({str(host_marker())!r}).read(); print('read the host marker')\nexcept OSError: print('ok')",
        _ok,
    ),
    Probe(
        "root filesystem read-only, /tmp writable",
        "import os\nbad = []\nfor path in ('/usr/probe', '/etc/probe', '/probe', '/var/probe'):\n"
        "    try:\n        open(path, 'w').write('x'); bad.append(path)\n    except OSError: pass\n"
        "open('/tmp/probe', 'w').write('x')\nprint('ok' if not bad else bad)",
        _ok,
    ),
    Probe(
        "no secrets in the environment",
        f"import os\nleaks = [k for k in os.environ if k == {SECRET_VARIABLE!r} or 'KEY' in k or 'TOKEN' in k]\n"
        "print('ok' if not leaks else leaks)",
        _ok,
    ),
    Probe("not root", "import os\nprint('ok' if os.getuid() != 0 else 'root')", _ok),
    Probe(
        "host kernel settings unwritable (/proc/sys, sysrq-trigger)", HOST_KERNEL_SETTINGS, _ok, Limits(timeout_s=10.0)
    ),
    Probe("CPU bounded to the worker's share (children that setsid included)", CPU_HOG_CHILDREN, _ok),
    Probe(
        "fork bomb contained",
        "import os\nwhile True:\n    os.fork()",
        lambda report: report.tests[0].verdict != "pass",
        Limits(timeout_s=3.0),
    ),
    Probe(
        "memory bomb gives a memory verdict",
        "x = [bytearray(50 << 20) for _ in range(10**4)]",
        _verdict("memory_limit"),
        Limits(timeout_s=5.0, memory_mb=256),
    ),
    Probe("infinite loop gives a time verdict", "while True:\n    pass", _verdict("time_limit"), Limits(timeout_s=1.0)),
    Probe("sleep gives a time verdict", "import time\ntime.sleep(60)", _verdict("time_limit"), Limits(timeout_s=1.0)),
    Probe(
        "huge output capped",
        "while True:\n    print('y' * 4096)",
        _verdict("output_limit"),
        Limits(timeout_s=5.0, output_bytes=1 << 16),
    ),
    Probe(
        "expected outputs unreachable (frames, gc, /proc/*/mem)",
        HUNT_EXPECTED_OUTPUT,
        _verdict("wrong_answer"),
        Limits(timeout_s=10.0),
        expected_output=HIDDEN_OUTPUT,
    ),
    Probe(
        "harness's /proc/1 unreadable",
        "readable = []\nfor name in ('environ', 'mem', 'maps', 'cmdline'):\n"
        "    try:\n        open(f'/proc/1/{name}', 'rb').read(1); readable.append(name)\n"
        "    except OSError: pass\nprint('ok' if not readable or readable == ['cmdline'] else readable)",
        _ok,
    ),
    Probe("a system-call filter is loaded (Seccomp: 2)", SYSCALL_FILTERED, _ok),
    Probe("io_uring refused", IO_URING, _ok),
    Probe("ptrace refused, even on its own child", TRACE_ANOTHER, _ok),
    Probe(
        "nested user namespaces denied",
        "import ctypes\nprint('ok' if ctypes.CDLL(None).unshare(0x10000000) != 0 else 'created one')",
        _ok,
    ),
    Probe(
        f"scratch space capped at {SCRATCH_MB} MiB each",
        FILL_SCRATCH.replace("print(written)", f"print('ok' if max(written.values()) <= {SCRATCH_MB} else written)"),
        _ok,
        Limits(timeout_s=20.0, memory_mb=512),
    ),
    Probe("nothing writable but the scratch space", NOTHING_ELSE_WRITABLE, _ok),
    Probe(
        "a job that fills /tmp and /dev/shm leaves them empty",
        CLEAN_SLATE,
        _ok,
        Limits(timeout_s=5.0),
        before=FILL_SCRATCH,
    ),
    Probe("a detached daemon does not outlive its job", NO_DAEMON, _ok, before=DAEMON),
    Probe("SysV IPC objects do not outlive their job", NO_SYSV, _ok, before=SYSV),
    Probe(
        "a forged report is the forger's runtime error",
        FORGED_REPORT,
        _verdict("runtime_error"),
    ),
    Probe(
        "garbage on the report channel is the program's runtime error",
        GARBAGE_REPORT,
        _verdict("runtime_error"),
    ),
    Probe(
        "a flood without a newline on the report channel is cut",
        FLOOD_REPORT,
        _verdict("runtime_error"),
        Limits(timeout_s=10.0, memory_mb=512),
    ),
    Probe("a report pipe made to block is still read", BLOCKING_REPORT, _ok_before_the_deadline),
    Probe("a closed nudge pipe still gets the job judged", NO_NUDGE, _ok),
    Probe(
        "a 3,000-level tree, symlink loops and 000 folders are wiped",
        "import os\nprint('ok' if not os.listdir('/tmp') else os.listdir('/tmp'))",
        _ok,
        before=DEEP_TREE,
    ),
    Probe(
        "a stopped zygote is replaced",
        "print('ok')",
        _ok,
        before=STOP_ZYGOTE,
    ),
    Probe("a POSIX message queue does not outlive its job", NO_MQUEUE, _ok, before=MQUEUE),
    Probe(
        "a kernel keyring key does not outlive its job",
        NO_KEYRING_KEY.format(numbers=KEYCTL),
        _ok,
        before=KEYRING_KEY.format(numbers=KEYCTL),
    ),
    Probe(
        "a harness's limits lowered by a job do not reach the next",
        HARNESS_LIMITS_INTACT,
        _ok,
        before=LOWER_HARNESS_LIMITS,
    ),
    Probe(
        "a harness's priority lowered by a job does not reach the next",
        HARNESS_PRIORITY_INTACT,
        _ok,
        before=LOWER_HARNESS_PRIORITY,
    ),
    Probe(
        "a harness's I/O priority lowered by a job does not reach the next",
        HARNESS_IO_PRIORITY_INTACT.format(ioprio=IOPRIO),
        _ok,
        before=LOWER_HARNESS_IO_PRIORITY.format(ioprio=IOPRIO),
    ),
    Probe(
        "a harness's CPUs narrowed by a job do not reach the next", HARNESS_CPUS_INTACT, _ok, before=NARROW_HARNESS_CPUS
    ),
    Probe(
        "signals to the harness harmless",
        "import os, signal\nfor pid in (1, os.getppid()):\n"
        "    for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):\n"
        "        try:\n            os.kill(pid, sig)\n        except OSError:\n            pass\n"
        "print('ok')",
        _ok,
    ),
]


def plant_secret() -> None:
    """Put a secret in this process's environment before workers start, so a leak would show."""
    os.environ.setdefault(SECRET_VARIABLE, uuid.uuid4().hex)


def run_probe(sandbox: Sandbox, probe: Probe) -> tuple[bool, ExecutionReport]:
    """Run one probe; probes with `before` need a pool of one worker, so both jobs meet the same sandbox."""
    if probe.before is not None:
        sandbox.run(probe.before, [TestCase(input="", output=None)], Limits(timeout_s=20.0, memory_mb=512))
    tests = [TestCase(input="", output=probe.expected_output)]
    report = sandbox.run(probe.program, tests, probe.limits)
    return probe.check(report), report
