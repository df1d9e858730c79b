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

SECRET_VARIABLE = "TESTTIME_PROBE_SECRET"
# An expected output no program can know: it has the shape the hunters below look for, and is random.
EXPECTED_PREFIX = "EXPECTED-"
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


# Searches the job's own objects (frames up the stack, every object the collector knows) and every process's
# memory it can open through /proc for anything shaped like an expected output, and prints what it finds.
HUNT_EXPECTED_OUTPUT = f"""import gc, os, re, sys
pattern = re.compile(rb"{EXPECTED_PREFIX}[0-9a-f]{{32}}")
found = set()
def look(value):
    text = value if isinstance(value, (bytes, bytearray)) else str(value).encode(errors="replace")
    found.update(m.decode() for m in pattern.findall(text))
frame = sys._getframe()
while frame is not None:
    for value in list(frame.f_locals.values()) + list(frame.f_globals.values()):
        look(repr(value)[:100000])
    frame = frame.f_back
for obj in gc.get_objects():
    if isinstance(obj, (dict, list, tuple)):
        look(repr(obj)[:100000])
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        maps = open(f"/proc/{{pid}}/maps").read().splitlines()
        mem = open(f"/proc/{{pid}}/mem", "rb", 0)
    except OSError:
        continue
    for line in maps:
        start, end = (int(x, 16) for x in line.split()[0].split("-"))
        if "r" in line.split()[1] and end - start < 1 << 28:
            try:
                mem.seek(start)
                look(mem.read(end - start))
            except (OSError, ValueError, OverflowError):
                pass
print(sorted(found)[0] if found else "none found")"""

FILL_SCRATCH = """import os
written = {}
for folder in ("/tmp", "/dev/shm"):
    written[folder] = 0
    try:
        for i in range(10**6):
            with open(f"{folder}/fill-{i}", "wb") as f:
                f.write(b"x" * (1 << 20))
            written[folder] += 1
    except OSError:
        pass
print(written)"""

CLEAN_SLATE = """import os
left = {f: os.listdir(f) for f in ("/tmp", "/dev/shm") if os.path.isdir(f)}
for i in range(16):  # room for 8 MiB again (files are capped at the output limit, 1 MiB)
    with open(f"/tmp/room-{i}", "wb") as f:
        f.write(b"x" * (512 << 10))
print("ok" if not any(left.values()) else left)"""

DAEMON = """import ctypes, os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        ctypes.CDLL(None).prctl(15, b"tt-probe-daemon", 0, 0, 0)
        time.sleep(600)
    os._exit(0)
time.sleep(0.2)
print("forked")"""

NO_DAEMON = """import os
names = []
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        names.append(open(f"/proc/{pid}/comm").read().strip())
    except OSError:
        pass
print("ok" if "tt-probe-daemon" not in names else names)"""

SYSV = """import ctypes
libc = ctypes.CDLL(None, use_errno=True)
print(libc.shmget(0, 1 << 20, 0o1000 | 0o600), libc.semget(0, 1, 0o1000 | 0o600), libc.msgget(0, 0o1000 | 0o600))"""

NO_SYSV = """entries = []
for kind in ("shm", "sem", "msg"):
    try:
        entries += open(f"/proc/sysvipc/{kind}").read().strip().splitlines()[1:]
    except OSError:
        pass
print("ok" if not entries else entries)"""

NOTHING_ELSE_WRITABLE = """import os
allowed = ("/tmp", "/dev/shm", "/dev/mqueue", "/proc", "/sys", "/dev/pts")
writable = []
for line in open("/proc/self/mounts"):
    point = line.split()[1]
    if point in allowed or point.startswith(("/proc/", "/sys/")) or not os.path.isdir(point):
        continue
    try:
        with open(os.path.join(point, ".probe"), "w") as f:
            f.write("x")
        writable.append(point)
    except OSError:
        pass
print("ok" if not writable else writable)"""


# Writes to every descriptor it holds beyond stdio: the harness's report channel among them.
def _report_writer(payload: str) -> str:
    return f"""import os
for fd in range(3, 256):
    try:
        os.write(fd, {payload})
    except OSError:
        pass
print("ok")"""


FORGED_REPORT = _report_writer(
    """b'{"index": 0, "status": "pwned", "stdout": [1, 2], "seconds": "soon", "error": null, "result": null}\\n'"""
)
GARBAGE_REPORT = _report_writer("b'garbage that is not JSON' * 100 + b'\\n'")
FLOOD_REPORT = """import os
chunk = b"x" * (1 << 20)
for fd in range(3, 256):
    try:
        os.fstat(fd)
    except OSError:
        continue
    try:
        for _ in range(64):  # 64 MiB without a newline
            os.write(fd, chunk)
    except OSError:
        pass
print("ok")"""

# The report pipe made to block again, then more printed than a pipe holds: the job process's report can no
# longer nudge the supervisor when the pipe is full (it waits in its write), so the supervisor must drain it
# unasked.
BLOCKING_REPORT = """import os
for fd in range(3, 256):
    try:
        os.set_blocking(fd, True)
    except OSError:
        pass
print("ok" + " " * 300000)"""
# Every pipe it holds but the first (its report pipe) closed: the nudge at the job's end never comes.
NO_NUDGE = """import os, stat
pipes = []
for fd in range(3, 256):
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode):
            pipes.append(fd)
    except OSError:
        pass
for fd in pipes[1:]:
    os.close(fd)
print("ok")"""

DEEP_TREE = """import os
os.chdir("/tmp")
for i in range(3000):
    os.mkdir("d")
    os.chdir("d")
os.symlink("/tmp", "loop")
os.symlink("loop2", "loop1")
os.symlink("loop1", "loop2")
os.mkdir("locked")
open("locked/file", "w").write("x")
os.chmod("locked", 0)
os.chdir("/tmp")
os.mkdir("/tmp/shut")
os.chmod("/tmp/shut", 0)
print("built")"""

STOP_ZYGOTE = """import os, signal
os.kill(os.getppid(), signal.SIGSTOP)  # the job process's parent is the zygote
print("stopped it")"""

MQUEUE = """import ctypes, os
rt = ctypes.CDLL("librt.so.1", use_errno=True)
rt.mq_open.restype = ctypes.c_int
q = rt.mq_open(b"/tt-probe", os.O_CREAT | os.O_RDWR, 0o600, None)
print(q, rt.mq_send(q, b"left behind", 11, 0) if q >= 0 else "no queue")"""

NO_MQUEUE = """import ctypes, os
rt = ctypes.CDLL("librt.so.1", use_errno=True)
rt.mq_open.restype = ctypes.c_int
q = rt.mq_open(b"/tt-probe", os.O_RDONLY)
print("ok" if q < 0 else "read a queue an earlier job left")"""

KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}  # add_key, keyctl
KEYRING_KEY = """import ctypes, os
add_key, keyctl = {numbers}.get(os.uname().machine, (None, None))
libc = ctypes.CDLL(None, use_errno=True)
made = []
for ring in (-3, -4, -5):  # session, user and user-session keyrings
    if add_key is not None:
        made.append(libc.syscall(add_key, b"user", b"tt-probe-%d" % -ring, b"left behind", 11, ring))
print(made)"""

NO_KEYRING_KEY = """import ctypes, os
add_key, keyctl = {numbers}.get(os.uname().machine, (None, None))
libc = ctypes.CDLL(None, use_errno=True)
found = []
for ring in (-3, -4, -5):
    if keyctl is not None:
        for name in (3, 4, 5):  # KEYCTL_SEARCH: a key the earlier job made, in any keyring we can reach
            key = libc.syscall(keyctl, 10, ring, b"user", b"tt-probe-%d" % name, 0)
            if key >= 0:
                found.append(name)
print("ok" if not found else f"found keys {{found}}")"""

# Opens (never writes) every host kernel setting a root-mapped uid could change.
HOST_KERNEL_SETTINGS = """import os
writable = []
paths = ["/proc/sysrq-trigger", "/proc/sys/vm/drop_caches", "/proc/sys/kernel/core_pattern"]
for folder, _, files in os.walk("/proc/sys"):
    paths += [os.path.join(folder, f) for f in files]
for path in paths:
    if path.startswith("/proc/sys/net/"):
        continue  # the sandbox's own network namespace
    try:
        os.close(os.open(path, os.O_WRONLY))
        writable.append(path)
    except OSError:
        pass
print("ok" if not writable else writable[:5])"""

# Children that leave their session spin for a second each; the CPU they got together must fit one CPU.
CPU_HOG_CHILDREN = """import os, time
readers = []
for _ in range(4):
    read, write = os.pipe()
    if os.fork() == 0:
        os.setsid()
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            pass
        os.write(write, str(time.process_time()).encode())
        os._exit(0)
    os.close(write)
    readers.append(read)
used = sum(float(os.read(r, 64) or 0) for r in readers)
print("ok" if used <= 1.35 else f"{used:.2f} CPU-seconds in 1 s")"""

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
