"""The in-sandbox test harness. Standalone (stdlib only): its source is sent into the sandbox and run there.

It serves jobs as JSON lines (stdio, or a unix socket for Docker) and stays resident as PID 1 of the
sandbox's pid namespace, so programs cannot signal it and a job costs a fork, not a container exec.

Per job it forks a fresh job process that closes every inherited descriptor, sets rlimits (address space,
CPU, file size), and runs the tests in order: per test, stdin and stdout are fresh memfds on fds 0 and 1
(so `sys.stdin.buffer.readline` and `sys.stdout.buffer.write` work, unlike the official mock), the program
runs in a fresh namespace with LiveCodeBench's prelude, and an interval timer bounds its time. The harness
watches from outside: a test that hangs past its bound or kills its process is judged from how it ended,
and a new job process continues with the next test. After each job it kills every leftover process.
Verdicts are judged here, in PID 1, never in the program's process.

Comparison follows the official grader: stdin tests compare stripped lines (equal count), each line exactly
or as whitespace-split tokens with exact Decimal equality; functional tests compare the JSON value of the
call's result with the expected JSON (tuples are lists). Like the official harness, a program shares its
process's memory with its test's input and could in principle read it; it can never write a verdict.
"""

import hashlib
import io
import json
import os
import resource
import select
import signal
import socket
import sys
import time
import traceback
from decimal import Decimal, InvalidOperation

PRELUDE = (
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\n"
    "from heapq import *\nfrom bisect import *\nfrom copy import *\nfrom math import *\nfrom random import *\n"
    "from statistics import *\nfrom itertools import *\nfrom functools import *\nfrom operator import *\n"
    "from io import *\nfrom sys import *\nfrom json import *\nfrom typing import *\n"
    "import string, re, datetime, collections, heapq, bisect, copy, math, random, statistics, itertools\n"
    "import functools, operator, io, sys, json, typing\n"
)
# Executed once here, so each forked test child starts with the prelude already imported (a fork, not 17 imports).
_PRELUDE_NAMESPACE = {"__builtins__": __builtins__}
exec(PRELUDE, _PRELUDE_NAMESPACE)
ERROR_BYTES = 2000
OUTPUT_PREVIEW = 1000


class _TimeLimit(BaseException):
    """Raised by the interval timer inside a test; BaseException so `except Exception` cannot swallow it."""


def _on_alarm(signum, frame):
    raise _TimeLimit()


def _job_process(program, tests, first, func_name, limits, report_fd, out_fd):
    """Runs in the forked job process: tests[first:] in order, one JSON line per test on report_fd. Never returns."""
    try:
        os.setsid()
        timeout = float(limits.get("timeout_s", 6.0))
        memory = int(limits.get("memory_mb", 1024)) << 20
        cap = int(limits.get("output_bytes", 1 << 20))
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        cpu = int(timeout * (len(tests) - first + 1)) + 5
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (cap + 1, cap + 1))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over-long output: writes fail with EFBIG instead
        signal.signal(signal.SIGALRM, _on_alarm)
        devnull = os.open(os.devnull, os.O_RDWR)
        for target in (0, 2):
            os.dup2(devnull, target)
        os.dup2(out_fd, 1)
        # Keep only stdio and the report pipe: the harness's own channel (a socket to the host, or its
        # stdin/stdout) must be unreachable, or a program could write reports of its own.
        for fd in [int(name) for name in os.listdir("/proc/self/fd")]:
            if fd > 2 and fd != report_fd:
                try:
                    os.close(fd)
                except OSError:
                    pass  # the listing's own descriptor, already gone
        sys.setrecursionlimit(50000)
        if hasattr(sys, "set_int_max_str_digits"):
            sys.set_int_max_str_digits(0)
        reports = os.fdopen(report_fd, "w", encoding="utf-8")
        try:
            code = compile(program, "<program>", "exec")
        except (SyntaxError, ValueError) as exc:
            for index in range(first, len(tests)):
                reports.write(
                    json.dumps(
                        {
                            "index": index,
                            "status": "compile_error",
                            "seconds": 0.0,
                            "error": f"{type(exc).__name__}: {exc}",
                            "stdout": "",
                        }
                    )
                    + "\n"
                )
            reports.flush()
            os._exit(0)
        for index in range(first, len(tests)):
            reports.write(json.dumps(_run_one(code, tests[index], func_name, timeout, cap, index)) + "\n")
            reports.flush()
        os._exit(0)
    except BaseException:  # noqa: BLE001 - never fall back into the harness's own loop
        os._exit(70)


def _run_one(code, test, func_name, timeout, cap, index):
    test_input = test.get("input", "")
    in_fd = os.memfd_create("stdin")
    os.write(in_fd, test_input.encode())
    os.lseek(in_fd, 0, os.SEEK_SET)
    os.dup2(in_fd, 0)
    os.close(in_fd)
    os.ftruncate(1, 0)
    os.lseek(1, 0, os.SEEK_SET)
    sys.stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8")
    namespace = dict(_PRELUDE_NAMESPACE)
    # `from sys import *` bound the harness's streams; programs must see this test's.
    namespace.update(__name__="__main__" if func_name is None else "solution", stdin=sys.stdin, stdout=sys.stdout)
    status, error, result = "ok", None, None
    started = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        try:
            exec(code, namespace)
            if func_name is not None:
                args = [json.loads(line) for line in test_input.splitlines() if line.strip()]
                owner = namespace["Solution"]() if "Solution" in namespace else None
                target = getattr(owner, func_name) if owner is not None else namespace[func_name]
                result = json.dumps(target(*args))
        except SystemExit as exc:
            if exc.code not in (None, 0):
                status, error = "runtime_error", f"SystemExit: {exc.code}"
        try:
            sys.stdout.flush()
        except OSError:
            status = "output_limit"
    except _TimeLimit:
        status = "time_limit"
    except MemoryError:
        status, error = "memory_limit", "MemoryError"
    except BaseException as exc:  # noqa: BLE001 - the program's error is the verdict's content
        frames = traceback.format_exception_only(type(exc), exc)
        status, error = "runtime_error", (frames[-1].strip() if frames else type(exc).__name__)[-ERROR_BYTES:]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    seconds = time.monotonic() - started
    size = os.fstat(1).st_size
    if size > cap:
        status = "output_limit"
    stdout = os.pread(1, min(size, cap), 0).decode("utf-8", "replace")
    return {"index": index, "status": status, "seconds": seconds, "error": error, "stdout": stdout, "result": result}


def _lines_match(actual, expected):
    got = actual.strip().split("\n")
    want = expected.strip().split("\n")
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        g, w = g.strip(), w.strip()
        if g == w:
            continue
        g_tokens, w_tokens = g.split(), w.split()
        if len(g_tokens) != len(w_tokens):
            return False
        try:
            if any(Decimal(a) != Decimal(b) for a, b in zip(g_tokens, w_tokens, strict=True)):
                return False
        except InvalidOperation:
            return False
    return True


def output_digest(text):
    normal = "\n".join(line.strip() for line in text.strip().split("\n"))
    return hashlib.sha256(normal.encode()).hexdigest()[:16]


def _kill_leftovers():
    """As PID 1 of a pid namespace, every other process is a leftover of the last test."""
    if os.getpid() != 1:
        return False
    killed = False
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != 1:
            try:
                os.kill(int(entry), signal.SIGKILL)
                killed = True
            except OSError:
                pass
    _reap()
    return killed


def _reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _verdict(test, status, stdout, result, func_name):
    if status == "ok":
        return _judge(result if func_name is not None else stdout, test)
    return "runtime_error" if status == "compile_error" else status


def run_job(job):
    """All tests of one job in a forked job process, re-forked after a test that killed or hung it."""
    tests, func_name, limits = job.get("tests", []), job.get("func_name"), job.get("limits", {})
    timeout = float(limits.get("timeout_s", 6.0))
    verdicts, index, dirty = [], 0, False
    while index < len(tests):
        report_r, report_w = os.pipe()
        out_fd = os.memfd_create("stdout")
        pid = os.fork()
        if pid == 0:
            os.close(report_r)
            _job_process(job["program"], tests, index, func_name, limits, report_w, out_fd)
        os.close(report_w)
        reader = _LineReader(report_r)
        stop = False
        while index < len(tests) and not stop:
            line = reader.readline(timeout + 1.0)
            if not line:
                # Hung past the bound (None) or died (EOF): this test's verdict comes from how it ended.
                verdicts.append(_ended(pid, line is None, out_fd, tests[index], func_name, timeout))
                dirty, stop = True, True
            else:
                report = json.loads(line)
                verdict = _verdict(tests[index], report["status"], report["stdout"], report.get("result"), func_name)
                verdicts.append(
                    _entry(
                        verdict,
                        report["seconds"],
                        report["error"],
                        report["status"] == "compile_error",
                        report.get("result") if func_name is not None else report["stdout"],
                    )
                )
                dirty = dirty or verdict in ("time_limit", "memory_limit", "output_limit")
            if job.get("early_exit") and verdicts[-1]["verdict"] != "pass":
                stop, index = True, len(tests)
            else:
                index += 1
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        _reap_child(pid)
        os.close(report_r)
        os.close(out_fd)
        dirty = _kill_leftovers() or dirty
    return {"tests": verdicts, "dirty": dirty}


class _LineReader:
    """Lines from a pipe with a timeout; unbuffered reads, so select never misses a line read ahead."""

    def __init__(self, fd):
        self.fd, self.buffer = fd, b""

    def readline(self, timeout):
        """A line; "" at end of stream; None when nothing complete came within the timeout."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([self.fd], [], [], max(remaining, 0))
            if not ready:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return ""
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode("utf-8", "replace")


def _ended(pid, hung, out_fd, test, func_name, timeout):
    """The verdict of a test whose job process hung or died without reporting it."""
    if hung:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        return _entry("time_limit", timeout, "no result within the time limit", False, "")
    status = _reap_child(pid)
    if status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        # os._exit(0) mid-test: judge what it printed, as a normal exit would be judged.
        stdout = os.pread(out_fd, 1 << 20, 0).decode("utf-8", "replace")
        return _entry(_judge(stdout, test) if func_name is None else "runtime_error", 0.0, None, False, stdout)
    if status is not None and os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        verdict = (
            "time_limit" if sig == signal.SIGXCPU else "memory_limit" if sig == signal.SIGKILL else "runtime_error"
        )
        return _entry(verdict, 0.0, f"killed by signal {sig}", False, "")
    return _entry("runtime_error", 0.0, "the test process exited without a result", False, "")


def _reap_child(pid):
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return None


def _entry(verdict, seconds, error, compile_error, output):
    output = output or ""
    return {
        "verdict": verdict,
        "seconds": round(seconds, 4),
        "error": error,
        "compile_error": compile_error,
        "output": output[:OUTPUT_PREVIEW],
        "output_digest": output_digest(output),
    }


def _judge(result, test):
    expected = test.get("output")
    if expected is None:
        return "pass"  # an input without an expected output: it ran; selectors compare the outputs
    if test.get("testtype") == "functional":
        try:
            return "pass" if json.loads(result) == json.loads(expected) else "wrong_answer"
        except ValueError:
            return "wrong_answer"
    return "pass" if _lines_match(result, expected) else "wrong_answer"


def serve(reader, writer):
    for line in reader:
        if not line.strip():
            continue
        try:
            report = run_job(json.loads(line))
        except Exception as exc:  # noqa: BLE001 - a harness fault is reported, never a pass
            report = {"harness_error": f"{type(exc).__name__}: {exc}"}
        writer.write(json.dumps(report) + "\n")
        writer.flush()


def main():
    # As PID 1 the kernel drops signals whose action is the default; Python's own SIGINT handler would not be
    # dropped (a program's SIGINT would raise KeyboardInterrupt here), so every handler goes back to default.
    for sig in (signal.SIGINT, signal.SIGPIPE, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    if len(sys.argv) >= 3 and sys.argv[1] == "--socket":
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(sys.argv[2])
        os.chmod(sys.argv[2], 0o666)
        server.listen(1)
        while True:
            connection, _ = server.accept()
            with (
                connection,
                connection.makefile("r", encoding="utf-8") as reader,
                connection.makefile("w", encoding="utf-8") as writer,
            ):
                serve(reader, writer)
    else:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        serve(sys.stdin, sys.stdout)


if __name__ == "__main__":
    main()
