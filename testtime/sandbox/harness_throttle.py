"""In-sandbox CPU bound for a sandbox without a CPU cgroup (bwrap where no cgroup hierarchy can be written).

Standalone (stdlib only); it travels into the sandbox with the other harness files. While a job runs, a thread
of the supervisor (PID 1) adds up, a window at a time, the CPU time of every process in the pid namespace but
itself and the zygote, and when they used more than their share (`cpus` per second) it stops them all
(SIGSTOP) for as long as the excess would take at that share, then continues them (SIGCONT): in user space,
what cgroup v2's `cpu.max` does in the kernel. Leaving a session or a process group escapes nothing: PID 1 of
a pid namespace sees and signals every process in it. Coarser than a cgroup (the kernel's clock ticks, a 0.1 s
window), so a cgroup is used wherever one can be made.
"""

import os
import signal

THROTTLE_WINDOW_S = 0.1


def _cpu_times(spare):
    """{(pid, start ticks): CPU seconds} of every process in this pid namespace but `spare` (a reaped child's
    time counts in its parent's)."""
    ticks = os.sysconf("SC_CLK_TCK")
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in spare:
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat_file:
                fields = stat_file.read().rpartition(")")[2].split()
            # utime, stime, cutime, cstime are stat's fields 14-17; the start time is field 22
            found[(int(entry), int(fields[19]))] = sum(int(x) for x in fields[11:15]) / ticks
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return found


def _signal_all(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


class CpuThrottle:
    """`with CpuThrottle(cpus, spare):` bounds the processes of the namespace (but `spare`) to `cpus` CPUs; a
    `cpus` of None bounds nothing."""

    def __init__(self, cpus, spare):
        self.cpus, self.spare = cpus, set(spare)
        self.done = self.thread = None  # a cgroup bounds the CPU
        if cpus is not None:
            # Imported only here: once loaded, threading's after-fork hook runs in every job process (130 page
            # faults, ~0.1 ms of a job's CPU), and only a harness that throttles needs a thread.
            import threading

            self.done = threading.Event()
            self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        if self.thread is not None:
            self.thread.start()
        return self

    def __exit__(self, *exc):
        if self.thread is not None:
            self.done.set()
            self.thread.join()

    def _run(self):
        seen = _cpu_times(self.spare)
        while not self.done.wait(THROTTLE_WINDOW_S):
            now = _cpu_times(self.spare)
            used = sum(max(0.0, cpu - seen.get(key, 0.0)) for key, cpu in now.items())
            seen = now
            over = used - self.cpus * THROTTLE_WINDOW_S
            if over > 0:
                stopped = self._stop_all()
                self.done.wait(over / self.cpus)
                _signal_all(stopped, signal.SIGCONT)
                seen = _cpu_times(self.spare)

    def _stop_all(self):
        """SIGSTOP every process, again for any forked meanwhile (a few sweeps); the pids stopped."""
        stopped = set()
        for _ in range(5):
            fresh = {pid for pid, _ in _cpu_times(self.spare)} - stopped
            if not fresh:
                break
            _signal_all(fresh, signal.SIGSTOP)
            stopped |= fresh
        return stopped
