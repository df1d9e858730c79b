"""The in-sandbox test harness's supervisor. Standalone (stdlib only): `harness_clean.py`, `harness_job.py`,
`harness_throttle.py`, `harness_zygote.py` and this file travel into the sandbox as one source
(`pool.HARNESS_SOURCE`) and run there.

The supervisor is PID 1 of the sandbox's pid namespace, so programs cannot signal it, and it makes itself
non-dumpable first, so no program can read its memory or environment through /proc/1. It serves jobs as JSON
lines over one byte stream (stdio for bubblewrap, a unix socket for Docker), so a job costs no process start.

Job processes come from a zygote: a process forked at start-up, before any job, that never receives job
data; it forks a job process on request and hands its pipes to the supervisor (SCM_RIGHTS). So a job
process's memory holds its own job and nothing of any earlier one, and the next one is forked and warmed up
while the worker is idle. The supervisor hands a job's line to that process as it arrives and parses it
meanwhile. The job process writes each test's report into a pipe as the test ends (a later test cannot change
it) and nudges the supervisor only when the job ends or the pipe is full: a wake-up per test, across CPUs, cost
as much as the test itself. A test that hangs past its bound or kills its job process is reported from how it
ended, and a fresh job process continues with the next test.

Protocol. Host → harness: `{"program", "func_name", "limits", "inputs": [{"input", "testtype"}], "stream"}`:
inputs only, expected outputs never enter the sandbox; the host judges. Harness → host: with `stream` (early
exit) one `{"test": ...}` line per test as it ends, and the host may send `{"stop": true}` at any time; then
`{"done": true, "tests": [...], "limit_hit"}` (tests only when not streamed; a worker that hit a limit is
replaced at once). After every job, off the job's critical path, the harness kills every leftover process,
wipes `/tmp`, `/dev/shm` and `/dev/mqueue`, verifies they are empty and that no SysV IPC object survives,
pre-forks the next job process, and sends `{"ready": true, "recycle": [reasons]}`; the host sends the next
job only after that line, and replaces the worker when there is any reason to.
"""

import json
import os
import select
import signal
import socket
import sys
import time

if "job_process" not in globals():  # imported from the package rather than run as the joined source
    from testtime.sandbox.harness_clean import (
        MAX_REPORT_BYTES,
        SCRATCH,
        checked_report,
        clear_keyrings,
        inherited_settings,
        kill_leftovers,
        sysv_objects,
        wipe,
    )
    from testtime.sandbox.harness_job import result_record
    from testtime.sandbox.harness_throttle import CpuThrottle
    from testtime.sandbox.harness_zygote import Zygote

LIMIT_STATUSES = ("time_limit", "memory_limit", "output_limit")
FORGED = "a malformed report on the harness's channel (the program wrote to it)"
DRAIN_EVERY_S = 0.05  # unnudged, the report pipe is still read this often


class _LineReader:
    """Lines from a descriptor; unbuffered reads, so select never misses a line already read ahead."""

    def __init__(self, fd):
        self.fd, self.buffer = fd, b""

    def has_line(self):
        return b"\n" in self.buffer

    def pop_line(self):
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode("utf-8", "replace")

    def fill(self):
        """One read; False at end of stream."""
        chunk = os.read(self.fd, 65536)
        self.buffer += chunk
        return bool(chunk)

    def drain(self):
        """Read what is there now, up to a bound (a program may write without end); False at end of stream."""
        while len(self.buffer) <= MAX_REPORT_BYTES:
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:
                return True
            if not chunk:
                return False
            self.buffer += chunk
        return True

    def readline(self):
        """The next line, blocking; "" at end of stream."""
        while not self.has_line():
            if not self.fill():
                return self.pop_line() if self.buffer else ""
        return self.pop_line()


class _Channel:
    """The host's end: JSON lines in, JSON lines out."""

    def __init__(self, read_fd, write_fd):
        self.reader, self.write_fd = _LineReader(read_fd), write_fd

    def send(self, message):
        self.send_text(json.dumps(message))

    def send_text(self, text):
        """One line already in JSON (reports are forwarded as the job process wrote them, once checked)."""
        data = (text + "\n").encode()
        while data:
            data = data[os.write(self.write_fd, data) :]


class _JobProcess:
    def __init__(self, spawned):
        self.pid, self.job_w, report_r, self.out_fd, self.nudge = spawned
        os.set_blocking(report_r, False)  # drained when nudged: never a read that waits
        self.report = _LineReader(report_r)
        self.nudge_closed = False
        self.killed = False

    def start(self, data):
        """Hand it its job (JSON, with "first": the test to start at, when not the first)."""
        try:
            while data:
                data = data[os.write(self.job_w, data) :]
        except OSError:
            pass  # it died before reading: the report pipe says so
        os.close(self.job_w)

    def kill(self):
        if self.killed:
            return
        self.killed = True
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            pass
        for fd in (self.report.fd, self.out_fd, self.nudge):
            os.close(fd)


def _stop_requested(channel):
    """Consume whatever the host sent while a job runs; True when it asked to stop (its verdict is in)."""
    stop = False
    while channel.reader.has_line():
        try:
            stop = stop or bool(json.loads(channel.reader.pop_line()).get("stop"))
        except ValueError:
            continue
    return stop


def _next_report(process, channel, deadline):
    """("report", line) | ("stop", None) | ("hung", None) | ("ended", None) | ("garbled", None): the next thing a
    test did. Streaming to the host, the report pipe itself is watched (each result goes on as it comes);
    otherwise the nudge pipe, and the report pipe is drained when nudged (the job ended, or the pipe is full)
    and every DRAIN_EVERY_S (a program may have taken the nudge away: closed it, or made the pipe block)."""
    report = process.report
    while True:
        if channel is not None and _stop_requested(channel):
            return "stop", None
        if report.has_line():
            return "report", report.pop_line()
        if len(report.buffer) > MAX_REPORT_BYTES:
            return "garbled", None  # a line no report is this long: the program is flooding the channel
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            still_open = report.drain()  # what came in since the last nudge or drain
            if not report.has_line():
                return ("hung" if still_open else "ended"), None
            continue
        direct = channel is not None or process.nudge_closed
        watched = [report.fd if direct else process.nudge] + ([channel.reader.fd] if channel is not None else [])
        ready = select.select(watched, [], [], remaining if direct else min(remaining, DRAIN_EVERY_S))[0]
        if channel is not None and channel.reader.fd in ready and not channel.reader.fill():
            os._exit(0)  # the host is gone: PID 1 exiting takes every process of the sandbox with it
        if direct and report.fd not in ready:
            continue
        if not direct and process.nudge in ready and not os.read(process.nudge, 65536):
            process.nudge_closed = True  # the job process is gone, or the program closed it
        if not report.drain() and not report.has_line():
            return "ended", None


class Supervisor:
    def __init__(self, channel, cpus=None):
        self.channel, self.cpus = channel, cpus  # cpus: bound the jobs' CPU here (no cgroup does it)
        self.settings = inherited_settings(os.getpid())  # the zygote's too: it inherits them
        self.zygote = Zygote()
        self.next_process = None
        self.job_groups = []  # the job processes of the last job (each leads its own process group)

    def _process(self):
        spawned = self.next_process or self.zygote.spawn()
        self.next_process = None
        if spawned is None:
            raise RuntimeError("the zygote is gone")
        self.job_groups.append(spawned[0])
        return _JobProcess(spawned)

    def run_job(self, job, process):
        """All tests of one job, from `process` (already handed the job), re-forked after a test that killed or
        hung its job process.

        Returns (results, limit_hit), each result as JSON text. With `stream`, each result goes to the host as
        soon as it exists and the host may stop the job early."""
        inputs, func_name = job.get("inputs", []), job.get("func_name")
        stream = self.channel if job.get("stream") else None
        timeout = float(job.get("limits", {}).get("timeout_s", 6.0))
        with CpuThrottle(self.cpus, {1, os.getpid(), self.zygote.pid}):
            return self._run_tests(job, process, inputs, func_name, stream, timeout)

    def _run_tests(self, job, process, inputs, func_name, stream, timeout):
        results, index, limit_hit, stopped = [], 0, False, False
        while index < len(inputs) and not stopped:
            if process is None:
                process = self._process()
                process.start(json.dumps({**job, "first": index}).encode())
            while index < len(inputs):
                event, line = _next_report(process, stream, time.monotonic() + timeout + 1.0)
                if event == "stop":
                    stopped = True
                    break
                checked = checked_report(line, index) if event == "report" else None
                if checked is not None:
                    result, text = checked, line  # as checked: the same JSON on the host
                elif event in ("report", "garbled"):  # the program wrote to the report channel: never trusted
                    event, result = "garbled", result_record(index, "runtime_error", 0.0, FORGED, "")
                else:  # hung past the bound, or died: the result comes from how it ended
                    result = self._ended(process, event == "hung", index, func_name, timeout)
                if checked is None:
                    text = json.dumps(result)
                results.append(text)
                limit_hit = limit_hit or result["status"] in LIMIT_STATUSES or event != "report"
                if stream is not None:
                    self.channel.send_text(f'{{"test": {text}}}')
                index += 1
                if event != "report":
                    break  # the job process is gone: a new one continues with the next test
            process.kill()
            process = None
        if process is not None:
            process.kill()  # handed a job with no tests
        return results, limit_hit

    def _ended(self, process, hung, index, func_name, timeout):
        """The result of a test whose job process hung or died without reporting it."""
        if hung:
            process.kill()
            return result_record(index, "time_limit", timeout, "no result within the time limit", "")
        status = self.zygote.exit_status(process.pid, 5.0)
        if status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            # os._exit(0) mid-test: what it printed is judged, as a normal exit would be; a function returned nothing.
            stdout = os.pread(process.out_fd, 1 << 20, 0).decode("utf-8", "replace")
            if func_name is None:
                return result_record(index, "ok", 0.0, None, stdout)
            return result_record(index, "runtime_error", 0.0, "the process exited before returning", stdout)
        if status is not None and os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            verdict = (
                "time_limit" if sig == signal.SIGXCPU else "memory_limit" if sig == signal.SIGKILL else "runtime_error"
            )
            return result_record(index, verdict, 0.0, f"killed by signal {sig}", "")
        return result_record(index, "runtime_error", 0.0, "the test process exited without a result", "")

    def cleanup(self, limit_hit):
        """Leave the sandbox as the next job must find it, and pre-fork the next job process; the reasons,
        if any, to replace the worker. Only as PID 1 of a sandbox: on a host (perf's unisolated reference)
        it touches nothing."""
        reasons = ["a limit was hit"] if limit_hit else []
        job_groups, self.job_groups = set(self.job_groups), []
        self.zygote.resume()  # stopped by the job: it would answer nothing below
        for pid in job_groups:
            self.zygote.exit_status(pid, 1.0)  # killed at the end of its job: let it go before the sweep
        if os.getpid() == 1:
            if kill_leftovers({1, self.zygote.pid}, job_groups):
                reasons.append("processes left behind")
            if any(inherited_settings(pid) != self.settings for pid in (1, self.zygote.pid)):
                reasons.append("a program changed the harness's limits, priority, I/O priority or CPUs")
            for folder in SCRATCH:
                if not wipe(folder):
                    reasons.append(f"{folder} could not be emptied")
            if sysv_objects():
                reasons.append("SysV IPC objects left behind")
            if not clear_keyrings():
                reasons.append("a kernel keyring kept a key, or would not clear")
        self.zygote.drain()
        self.next_process = self.zygote.spawn()  # every job took the one before, tests or none
        if self.next_process is None:  # replace the worker now, not after the next job waits
            reasons.append("the zygote was stopped, or is gone")
        return reasons

    def serve(self):
        self.channel.send({"ready": True, "recycle": self.cleanup(False)})
        while True:
            line = self.channel.reader.readline()
            if not line:
                return  # the host closed the stream
            if '"program"' not in line:
                continue  # a stop, or a read, that arrived after its job had finished
            limit_hit = True
            try:
                # The job process is handed the line before it is parsed here: its wake-up starts the job's
                # clock, this parse runs beside it.
                process = self._process()
                process.start(line.encode())
                job = json.loads(line)
                if not isinstance(job, dict):
                    raise ValueError("a job line that is not a JSON object")
                results, limit_hit = self.run_job(job, process)
                tests = "" if job.get("stream") else ", ".join(results)
                self.channel.send_text(f'{{"done": true, "limit_hit": {json.dumps(limit_hit)}, "tests": [{tests}]}}')
            except Exception as exc:  # noqa: BLE001 - a harness fault is reported, never a pass
                self.channel.send({"harness_error": f"{type(exc).__name__}: {exc}"})
            self.channel.send({"ready": True, "recycle": self.cleanup(limit_hit)})


def _make_undumpable():
    """PR_SET_DUMPABLE 0: /proc/1/mem, maps and environ become unreadable to the programs (same uid)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        pass  # `testtime sandbox check` reports whether /proc/1 is readable


def main():
    # As PID 1 the kernel drops signals whose action is the default; Python's own SIGINT handler would not be
    # dropped (a program's SIGINT would raise KeyboardInterrupt here), so every handler goes back to default.
    for sig in (signal.SIGINT, signal.SIGPIPE, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)
    _make_undumpable()
    options = dict(zip(sys.argv[1::2], sys.argv[2::2], strict=False))  # "--connect PATH", "--cpus N"
    cpus = float(options["--cpus"]) if "--cpus" in options else None
    if "--connect" in options:
        # Docker: the host listens on a socket in a read-only folder; after this one connection it is gone.
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(options["--connect"])
        Supervisor(_Channel(connection.fileno(), connection.fileno()), cpus).serve()
    else:
        Supervisor(_Channel(0, 1), cpus).serve()


if __name__ == "__main__":
    main()
