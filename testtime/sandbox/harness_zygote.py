"""The in-sandbox harness's zygote, and the supervisor's handle on it. Standalone (stdlib only); it travels into
the sandbox with the other `harness_*.py` files as one source.

The zygote is forked by the supervisor at start-up, before any job, and never receives job data: it forks a job
process on request, hands its pipes to the supervisor (SCM_RIGHTS) and reports how each one ended. Its own
set-up (`prepare_zygote`) is what every job process inherits rather than redoes.
"""

import os
import select
import signal
import socket
import time

if "job_process" not in globals():  # imported from the package rather than run as the joined source
    from testtime.sandbox.harness_job import job_process, prepare_zygote


class Zygote:
    """The supervisor's handle on the zygote: job processes on request, and how each one ended."""

    def __init__(self):
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.pid = os.fork()
        if self.pid == 0:
            self.sock.close()
            _zygote_main(theirs)
        theirs.close()
        self.sock.settimeout(5.0)  # a zygote that does not answer in that time is as good as gone
        self.exits = {}

    def stopped(self):
        """Whether a program stopped the zygote (SIGSTOP): then it would never answer again."""
        try:
            fd = os.open(f"/proc/{self.pid}/stat", os.O_RDONLY)
            try:
                return os.read(fd, 4096).rpartition(b")")[2].split()[0] in (b"T", b"t")
            finally:
                os.close(fd)
        except (OSError, IndexError):
            return True  # gone

    def resume(self):
        """A zygote a program stopped (`kill(-1, SIGSTOP)`) is continued: nothing of it changed, and replacing the
        worker for it cost 6 s a job. Sent whatever the zygote's state reads: a SIGCONT also discards a stop still
        pending (sent by the job, not yet taken), which a state read would miss. A zygote that is gone stays gone
        (`spawn` then says so)."""
        try:
            os.kill(self.pid, signal.SIGCONT)
        except OSError:
            pass

    def spawn(self):
        """(pid, job pipe, report pipe, stdout memfd, nudge pipe) of a new job process; None when the zygote is
        gone or does not answer within a few seconds (stopped, or wedged)."""
        if self.stopped():
            return None
        try:
            self.sock.send(b"fork")
            while True:
                data, fds, _, _ = socket.recv_fds(self.sock, 4096, 4)
                if not data:
                    return None
                if data.startswith(b"exit "):
                    self._exited(data)
                    continue
                return (int(data.split()[1]), *fds)  # b"pid N"
        except (OSError, ValueError, IndexError):
            return None

    def exit_status(self, pid, timeout):
        """How job process `pid` ended (a wait status), or None if the zygote did not say in time."""
        deadline = time.monotonic() + timeout
        while pid not in self.exits:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([self.sock], [], [], remaining)[0]:
                return None
            data = self.sock.recv(4096)
            if not data:
                return None
            self._exited(data)
        return self.exits[pid]

    def _exited(self, message):
        """Record the zygote's b"exit PID STATUS"."""
        _, pid, status = message.split()
        self.exits[int(pid)] = int(status)

    def drain(self):
        """Forget the exits nobody asked about (job processes killed at the end of their job)."""
        while select.select([self.sock], [], [], 0)[0]:
            if not self.sock.recv(4096):
                return
        self.exits.clear()


def _zygote_main(sock):
    """Fork job processes on request; report each one's wait status. Never sees any job data. Never returns.

    Between forks the zygote holds stdio, its socket, /dev/null and one pidfd per live job process, nothing
    else (it closed the rest at start and closes each fork's other ends), so a job process closes exactly those
    it must not keep (a test reads what a program holds): a sweep of /proc/self/fd in each job process copied
    ~11 pages into it, and one in the zygote after each fork ~24 into the zygote."""
    try:
        for fd in [int(name) for name in os.listdir("/proc/self/fd")]:
            if fd > 2 and fd != sock.fileno():
                try:
                    os.close(fd)
                except OSError:
                    pass  # the listing's own descriptor, already gone
        devnull = prepare_zygote()
        # Each job process's end is watched through a pidfd, not a SIGCHLD handler: a job process would have to
        # undo the handler (signal.signal alone copied 61 pages into it).
        job_processes = {}  # pidfd: pid
        while True:
            ready = select.select([sock, *job_processes], [], [])[0]
            for pidfd in ready:
                if pidfd in job_processes:
                    pid = job_processes.pop(pidfd)
                    os.close(pidfd)
                    sock.send(b"exit %d %d" % (pid, os.waitpid(pid, 0)[1]))
            if sock in ready:
                if not sock.recv(64):
                    os._exit(0)  # the supervisor is gone
                job_r, job_w = os.pipe()
                report_r, report_w = os.pipe()
                out_fd = os.memfd_create("stdout")
                nudge_r, nudge_w = os.pipe()
                pid = os.fork()
                if pid == 0:
                    for fd in (sock.fileno(), job_w, report_r, nudge_r, *job_processes):
                        os.close(fd)
                    job_process(job_r, report_w, out_fd, devnull, nudge_w)
                job_processes[os.pidfd_open(pid)] = pid
                socket.send_fds(sock, [b"pid %d" % pid], [job_w, report_r, out_fd, nudge_r])
                for fd in (job_r, job_w, report_r, report_w, out_fd, nudge_r, nudge_w):
                    os.close(fd)
    except BaseException:  # noqa: BLE001 - never return into the supervisor's loop
        os._exit(70)
