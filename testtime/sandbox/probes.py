"""Isolation probes: small hostile programs and the outcome that proves a property holds.

`testtime sandbox check` runs them on every available backend and prints what holds; the test suite runs
each one on each backend as its own test.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from testtime.core.records import TestCase
from testtime.sandbox import ExecutionReport, Limits, Sandbox

SECRET_VARIABLE = "TESTTIME_PROBE_SECRET"


@dataclass(frozen=True)
class Probe:
    name: str
    program: str
    check: Callable[[ExecutionReport], bool]
    limits: Limits = Limits(timeout_s=2.0)  # noqa: RUF009 - Limits is frozen, so sharing one default is safe
    expected_output: str = "ok"


def _ok(report: ExecutionReport) -> bool:
    return report.passed


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
    tests = [TestCase(input="", output=probe.expected_output)]
    report = sandbox.run(probe.program, tests, probe.limits)
    return probe.check(report), report
