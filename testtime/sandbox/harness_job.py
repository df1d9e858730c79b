"""The in-sandbox job process: runs one job's tests, in a process that never held another job's data.

Standalone (stdlib only); it travels into the sandbox with `harness_clean.py` and `harness.py` as one source. The
harness's zygote forks it before the job exists (so its memory holds no earlier program, input or output),
it warms itself up, then reads its one job from a pipe: the program and the tests' inputs, never an expected
output. Per test, stdin and stdout are fresh on fds 0 and 1 (so `sys.stdin.buffer.readline` and
`sys.stdout.buffer.write` work, unlike the official mock), the program runs in a fresh namespace with
LiveCodeBench's prelude (its names found as the program's builtins), an interval timer bounds its time, and
one JSON line per test reports how it ended and what it printed or returned. rlimits bound address space
(unless the job asks for no cap of its own: the official grader's has none), CPU time and file size.

`grader=official` on a stdin program does what LiveCodeBench's grader does to it: a final
`if __name__ == '__main__':` block is inlined, every statement but the imports moves into a function
`wrapped_function`, and the module is named `tmp_sol`, so an earlier main guard never runs (its body is
dead code there) and the program's variables are the function's locals. Unlike the official grader, the
module is built afresh per test, so an import bound to stdin sees this test's input.
"""

import ast
import builtins
import io
import json
import os
import resource
import select
import signal
import sys
import time
import traceback

if "new_session_keyring" not in globals():  # imported from the package rather than run as the joined source
    from testtime.sandbox.harness_clean import new_session_keyring

PRELUDE = (
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\n"
    "from heapq import *\nfrom bisect import *\nfrom copy import *\nfrom math import *\nfrom random import *\n"
    "from statistics import *\nfrom itertools import *\nfrom functools import *\nfrom operator import *\n"
    "from io import *\nfrom sys import *\nfrom json import *\nfrom typing import *\n"
    "import string, re, datetime, collections, heapq, bisect, copy, math, random, statistics, itertools\n"
    "import functools, operator, io, sys, json, typing\n"
)
# Executed once at harness start, so each job process starts with the prelude already imported. Its names reach
# programs as their builtins (a name a program binds shadows them, as it would shadow a global): a test's fresh
# namespace is then four entries. A copy of the prelude's ~480 names per test touched, in a freshly forked job
# process, hundreds of shared pages, each copied on its first write: 0.4-0.6 ms of a job's CPU.
_PRELUDE_NAMESPACE = {"__builtins__": builtins.__dict__}
exec(PRELUDE, _PRELUDE_NAMESPACE)
PROGRAM_BUILTINS = {**builtins.__dict__, **{k: v for k, v in _PRELUDE_NAMESPACE.items() if k != "__builtins__"}}
ERROR_BYTES = 2000
_WARM_UP_PROGRAM = "n = int(input())\nprint(n + 1)"
ZYGOTE_WARM_UPS = 20  # CPython 3.11 specialises a code object after 8 calls, an instruction after a few misses
_WARM_UP_JOB = json.dumps({"program": _WARM_UP_PROGRAM, "limits": {}, "inputs": [{"input": "1", "testtype": "stdin"}]})


class _TimeLimit(BaseException):
    """Raised by the interval timer inside a test; BaseException so `except Exception` cannot swallow it."""


def _on_alarm(signum, frame):
    raise _TimeLimit()


def prepare_zygote():
    """Set once in the zygote what every job process inherits, rather than in each (a forked process copies
    each page it first writes): signal dispositions, the interpreter's limits, stdio on /dev/null (returned,
    open), and the job's code run until CPython has specialised it (it writes into code objects as it does)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over-long output: writes fail with EFBIG instead
    signal.signal(signal.SIGALRM, _on_alarm)
    sys.setrecursionlimit(50000)
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(devnull, target)  # the zygote has no use for the harness's stdio (with bwrap, the host's channel)
    fds = (os.memfd_create("stdin"), os.memfd_create("stdout"))
    for _ in range(ZYGOTE_WARM_UPS):
        _warm_up(fds, devnull)
    for fd in fds:
        os.close(fd)
    for target in (0, 1):
        os.dup2(devnull, target)
    return devnull


def job_process(job_fd, report_fd, out_fd, devnull, nudge_fd):
    """Runs in the forked job process: one JSON line per test on `report_fd`, a nudge on `nudge_fd` when the job
    ends. Never returns."""
    try:
        os.setsid()
        for target in (0, 2):
            os.dup2(devnull, target)
        os.dup2(out_fd, 1)  # never the harness's own stdout (with bwrap, the channel to the host)
        # Only stdio and this job's own descriptors are left once /dev/null goes (after the warm-up): the
        # harness's channel to the host never reached the zygote, which closed its socket and pidfds in this fork. (A
        # program can reach the report and nudge pipes and forge its own results: nothing it could not print.)
        new_session_keyring()  # what the program adds to its session keyring dies with this process
        for fd in (report_fd, nudge_fd):
            os.set_blocking(fd, False)  # a full pipe is the supervisor's to drain (`_Reports`)
        fds = (os.memfd_create("stdin"), out_fd)
        _warm_up(fds, devnull)
        os.close(devnull)
        job = json.loads(_read_all(job_fd))
        _run_job(job, _Reports(report_fd, nudge_fd), fds)
        _nudge(nudge_fd)  # every report is in the pipe
        os._exit(0)
    except BaseException:  # noqa: BLE001 - never fall back into the harness's own loop
        os._exit(70)


def _warm_up(fds, devnull):
    """A job's steps before any job exists, its reports to /dev/null: its parse, a compile, a test that reads
    and prints, its report. In a job process: a forked process copies each page it first writes, so those pages
    are copied here, not on the job's clock (the parse, compile and first test of a job cost 115, 80 and 150 us
    cold, 70, 70 and 120 warmed). In the zygote, repeated: CPython 3.11 specialises code it has run a few times
    by writing into its code objects, which each job process would otherwise copy (65 of 465 pages a job)."""
    _run_job(json.loads(_WARM_UP_JOB), _Reports(devnull, devnull), fds, limited=False)


def _read_all(fd):
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


class _Reports:
    """Writes each test's report into the report pipe as the test ends, so no later test can change it. The
    supervisor does not wake per report (a wake-up across CPUs cost a test as much as the test itself): it reads
    the pipe when nudged, at the job's end or when the pipe is full."""

    def __init__(self, report_fd, nudge_fd):
        self.report_fd, self.nudge_fd = report_fd, nudge_fd

    def __call__(self, record):
        data = (json.dumps(record) + "\n").encode()
        while data:
            try:
                data = data[os.write(self.report_fd, data) :]
            except BlockingIOError:
                _nudge(self.nudge_fd)
                select.select([], [self.report_fd], [])


def _nudge(nudge_fd):
    """Wake the supervisor. A full or closed nudge pipe (the program's doing) is no matter: the supervisor then
    has nudges to read, or reads the report pipe itself."""
    try:
        os.write(nudge_fd, b"!")
    except OSError:
        pass


def _run_job(job, report, fds, limited=True):
    """`limited`: under the job's rlimits (not in a warm-up: a limit, once lowered, stays lowered)."""
    inputs, first, func_name, limits = job["inputs"], job.get("first", 0), job.get("func_name"), job["limits"]
    timeout = float(limits.get("timeout_s", 6.0))
    memory = limits.get("memory_mb", 1024)
    cap = int(limits.get("output_bytes", 1 << 20))
    if limited:
        if memory is not None:  # None: the sandbox's own bound only (the official grader sets none)
            resource.setrlimit(resource.RLIMIT_AS, (int(memory) << 20, int(memory) << 20))
        cpu = int(timeout * (len(inputs) - first + 1)) + 5
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (cap + 1, cap + 1))
    official = {} if job.get("grader") == "official" else None  # the module and its Solution, kept across tests
    if official is not None and limited:
        official_guard()
    program = job["program"]
    if official is not None and func_name is None:
        program = official_stdin(program)
    try:
        code = compile(program, "<program>", "exec")
    except (SyntaxError, ValueError) as exc:
        error = f"{type(exc).__name__}: {exc}"
        for index in range(first, len(inputs)):
            report(result_record(index, "compile_error", 0.0, error, ""))
        return
    for index in range(first, len(inputs)):
        record = _run_one(code, inputs[index], func_name, timeout, cap, index, fds, official)
        report(record)
        if record["error"] == THREAD_LEFT:  # whatever it prints next would land in a later test's output
            for later in range(index + 1, len(inputs)):
                report(result_record(later, "runtime_error", 0.0, THREAD_LEFT, ""))
            return


THREAD_LEFT = "a thread the program started outlived its test (its output would land in the next test's)"
# LiveCodeBench's digit limit: its metrics module sets it at import, so every graded program runs under it
OFFICIAL_INT_DIGITS = 50000


def official_guard():
    """What LiveCodeBench's `reliability_guard` does before a program runs (facts from its source, not its
    code): destructive and process-making functions set to None, `quit` and `help` gone, OMP at one thread,
    faulthandler off, a few modules made unimportable; and its int-to-string digit limit."""
    import faulthandler
    import shutil
    import subprocess

    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(OFFICIAL_INT_DIGITS)
    faulthandler.disable()
    builtins.quit = None
    PROGRAM_BUILTINS["quit"] = PROGRAM_BUILTINS["help"] = None
    os.environ["OMP_NUM_THREADS"] = "1"
    for name in (
        "kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork", "forkpty",
        "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod", "fchown", "chmod", "chown",
        "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir",
    ):  # fmt: skip
        setattr(os, name, None)
    shutil.rmtree = shutil.move = shutil.chown = None
    subprocess.Popen = None
    for name in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        sys.modules[name] = None


def _run_one(code, test, func_name, timeout, cap, index, fds, official=None):
    """One test. `official` (a dict, kept across a job's tests) switches to the official grader's semantics:
    the module runs once and one `Solution` serves every test; any SystemExit ends a program normally; the
    result goes back with its exact types (tuples, non-string keys, sets), for the official comparison."""
    test_input = test.get("input", "")
    stdin_fd, out_fd = fds  # memfds; fds 0 and 1 are made theirs again for every test (a program may close them)
    data = test_input.encode()
    os.pwrite(stdin_fd, data, 0)  # then cut to its length: a truncation to 0 first freed the page this re-allocated
    os.ftruncate(stdin_fd, len(data))
    os.dup2(stdin_fd, 0)  # fds 0 and 1 share their memfd's offset, which the streams rewind
    os.dup2(out_fd, 1)
    os.ftruncate(out_fd, 0)
    sys.stdin, sys.stdout = _fresh_streams()
    # `from sys import *` bound the harness's streams; programs must see this test's.
    name = "tmp_sol" if official is not None else "__main__" if func_name is None else "solution"
    namespace = {"__builtins__": PROGRAM_BUILTINS, "__name__": name, "stdin": sys.stdin, "stdout": sys.stdout}
    status, error, result = "ok", None, None
    started = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        try:
            if official is not None and func_name is not None:
                if "target" not in official:
                    exec(code, namespace)
                    owner = namespace["Solution"]() if "Solution" in namespace else None
                    official["target"] = getattr(owner, func_name) if owner is not None else namespace[func_name]
                args = [json.loads(line) for line in test_input.splitlines() if line.strip()]
                result = json.dumps(exact(official["target"](*args)))
            elif official is not None:
                exec(code, namespace)
                if "wrapped_function" in namespace:
                    namespace["wrapped_function"]()
            else:
                exec(code, namespace)
                if func_name is not None:
                    args = [json.loads(line) for line in test_input.splitlines() if line.strip()]
                    owner = namespace["Solution"]() if "Solution" in namespace else None
                    target = getattr(owner, func_name) if owner is not None else namespace[func_name]
                    result = json.dumps(target(*args))
        except SystemExit as exc:
            if exc.code not in (None, 0) and official is None:
                status, error = "runtime_error", f"SystemExit: {exc.code}"
        try:
            sys.stdout.flush()
            _STREAMS["clean"] = True  # nothing left in their buffers: the next test may rewind them
        except OSError:
            status = "output_limit"
    except _TimeLimit:
        status = "time_limit"
    except MemoryError:
        status, error = "memory_limit", "MemoryError"
    except BaseException as exc:  # noqa: BLE001 - the program's error is the result's content
        frames = traceback.format_exception_only(type(exc), exc)
        status, error = "runtime_error", (frames[-1].strip() if frames else type(exc).__name__)[-ERROR_BYTES:]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if _threads_outlive(started + timeout):
        status, error = "runtime_error", THREAD_LEFT
    seconds = time.monotonic() - started
    size = os.fstat(out_fd).st_size
    if size > cap:
        status = "output_limit"
    stdout = os.pread(out_fd, min(size, cap), 0).decode("utf-8", "replace")
    return result_record(index, status, seconds, error, stdout, result)


def _threads_outlive(deadline):
    """Whether a thread the program started is still running once the test's time is up (waited for until then,
    its output then counted in this test's): the job cannot go on without it writing into the next test."""
    threading = sys.modules.get("threading")  # imported only if the program imported it
    if threading is None:
        return False
    for thread in threading.enumerate():
        if thread is not threading.main_thread():
            thread.join(max(deadline - time.monotonic(), 0.0))
    alive = [t for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive()]
    if not alive:
        try:
            sys.stdout.flush()  # what the threads printed, in this test's output
        except OSError:
            pass
    return bool(alive)


_STREAMS = {"pair": None, "clean": False}  # this job process's stdin/stdout wrappers, and whether they are empty


def _fresh_streams():
    """Stdin and stdout as a test must find them: at the start of this test's input and of an empty output. The
    last test's wrappers are rewound when it flushed them and left them in place, open (most tests); otherwise
    new ones are made, and the old stdout can write nothing more, so nothing a test left in a buffer or did to a
    stream reaches the next."""
    pair, clean = _STREAMS["pair"], _STREAMS["clean"]
    _STREAMS["clean"] = False
    kept = pair is not None and sys.stdin is pair[0] and sys.stdout is pair[1]
    if clean and kept:
        try:
            if not (pair[0].closed or pair[1].closed):  # a detached wrapper raises here
                # A binary reader seeks within its read-ahead where it can, so what the last test left unread
                # would be read again: a seek to the end drops it. The text layer's seek then drops the decoder's
                # state and rewinds fd 0, which holds this test's input; the writer's rewinds fd 1.
                pair[0].buffer.seek(0, os.SEEK_END)
                pair[0].seek(0)
                pair[1].seek(0)
                return pair
        except (OSError, ValueError):
            pass  # closed, detached or otherwise unusable: new ones
    if pair is not None:  # what the last test left in a buffer (its time ran out mid-write) is never written:
        try:  # closing the raw file object (not fd 1) makes every later flush of it fail
            pair[1].buffer.raw.close()
        except (AttributeError, OSError, ValueError):
            pass
    os.lseek(0, 0, os.SEEK_SET)
    os.lseek(1, 0, os.SEEK_SET)
    pair = (
        io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8"),
        io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8"),
    )
    _STREAMS["pair"] = pair
    return pair


def official_stdin(program):
    """A stdin program as LiveCodeBench's grader rewrites it (`clean_if_name`, then `make_function`); a program
    that does not parse is left as it is, to fail at compile."""
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError):
        return program
    last = tree.body[-1] if tree.body else None
    if isinstance(last, ast.If) and ast.unparse(last.test).strip() == "__name__ == '__main__'":
        tree.body[-1:] = last.body
    imports = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
    wrapped = ast.parse("def wrapped_function():\n    pass").body[0]
    wrapped.body = [s for s in tree.body if not isinstance(s, (ast.Import, ast.ImportFrom))]
    return ast.unparse(ast.Module(body=imports, type_ignores=[])) + "\n" + ast.unparse(wrapped)


def exact(value, depth=0):
    """A returned value as JSON that keeps what JSON loses: tuples, non-string keys, sets, non-finite floats
    (each as a one-key object; every JSON object in the encoding is such a tag). The host decodes it."""
    if depth > 100:
        raise ValueError("result nested too deeply")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else {"~f": repr(value)}
    if isinstance(value, list):
        return [exact(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return {"~t": [exact(v, depth + 1) for v in value]}
    if isinstance(value, dict):
        return {"~d": [[exact(k, depth + 1), exact(v, depth + 1)] for k, v in value.items()]}
    if isinstance(value, (set, frozenset)):
        return {"~s": [exact(v, depth + 1) for v in value]}
    return {"~r": f"{type(value).__name__}: {repr(value)[:200]}"}


def result_record(index, status, seconds, error, stdout, result=None):
    return {
        "index": index,
        "status": status,
        "seconds": round(seconds, 6),
        "error": error,
        "stdout": stdout,
        "result": result,
    }
