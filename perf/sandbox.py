"""Sandbox cost: per-job overhead (trivial program, 20 tests) and throughput (100 candidates × 20 tests at
concurrency 2), side by side in one run.

Rows: bare host subprocess (a fresh `python3` running the harness per job, no isolation: reference only),
`docker run` per job, the Docker warm pool, and the bubblewrap pool: each job's median and p99 with jobs back to
back, and the median's share of the bare subprocess's; the median of a job sent to a pool at rest (5 ms after
the last one, its cleanup done); and the machine's CPU per job while jobs ran back to back (all processes, from
/proc/stat: on 2 cores, back-to-back jobs cannot take less wall time than half of it). A second table splits
each pool's CPU per job among its processes (/proc/PID/stat, clock ticks summed over the back-to-back jobs): this
script (the host side), the workers' supervisors, their zygotes, the job processes (reaped by the zygotes) with
their page faults, and everything else (the kernel, the container runtime). Goals: each pool's median
≤ 0.02 of the bare subprocess's (a job costs about a fork of a warm harness, not an interpreter's start);
throughput within 1.5× of the bare host run.

    .venv/bin/python perf/sandbox.py [--jobs 30] [--candidates 100]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from testtime.core.records import TestCase
from testtime.sandbox import SandboxError
from testtime.sandbox.choose import open_sandbox
from testtime.sandbox.docker_backend import DEFAULT_IMAGE
from testtime.sandbox.judge import judge
from testtime.sandbox.pool import HARNESS_SOURCE

PROGRAM = "n = int(input())\nprint(n + 1)"
REST_S = 0.005  # between jobs at rest: far longer than a worker's cleanup
TESTS = [TestCase(input=str(i), output=str(i + 1)) for i in range(20)]


def job_line() -> str:
    inputs = [{"input": t.input, "testtype": t.testtype} for t in TESTS]
    return json.dumps({"program": PROGRAM, "func_name": None, "limits": {}, "inputs": inputs})


def one_shot(command: list[str]) -> Callable[[], bool]:
    def run() -> bool:
        done = subprocess.run(command, input=job_line() + "\n", capture_output=True, text=True, timeout=120)
        messages = [json.loads(line) for line in done.stdout.splitlines()]
        results = next(m["tests"] for m in messages if m.get("done"))
        return all(judge(t, raw, False)["verdict"] == "pass" for t, raw in zip(TESTS, results, strict=True))

    return run


@dataclass
class PerJob:
    median_ms: float
    p99_ms: float
    cpu_ms: float  # the machine's, all processes, per job
    rest_ms: float | None = None  # the median of a job sent to an idle pool
    roles: dict[str, tuple[float, float | None]] | None = None  # CPU ms and minor faults per job, by process


Snapshot = dict[int, tuple[str, int, int, int, int, int]]  # pid: name, parent, own and reaped faults and ticks


def processes() -> Snapshot:
    found: Snapshot = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue  # gone meanwhile
        name, fields = stat[stat.index("(") + 1 : stat.rindex(")")], stat.rpartition(")")[2].split()
        faults, ticks = (int(fields[7]), int(fields[8])), [int(x) for x in fields[11:15]]
        found[int(entry)] = (name, int(fields[1]), *faults, ticks[0] + ticks[1], ticks[2] + ticks[3])
    return found


def roles(before: Snapshot, after: Snapshot, jobs: int, busy_s: float) -> dict[str, tuple[float, float | None]]:
    """Each role's CPU ms and minor faults per job. A zygote is a Python process, child of another (its worker's
    supervisor), that reaped job processes meanwhile (not the machine's init, reaping orphans)."""
    delta = {
        pid: [a - b for a, b in zip(after[pid][2:], before[pid][2:], strict=True)] for pid in after if pid in before
    }

    def python(pid: int) -> bool:
        return pid in delta and after[pid][0].startswith("python")

    zygotes = {pid for pid, d in delta.items() if d[1] >= jobs * 0.5 and python(pid) and python(after[pid][1])}
    supervisors = {after[pid][1] for pid in zygotes} - {os.getpid()}
    ms = 1000 / os.sysconf("SC_CLK_TCK") / jobs
    table: dict[str, tuple[float, float | None]] = {}
    for role, pids in (("host (this script)", {os.getpid()}), ("supervisors", supervisors), ("zygotes", zygotes)):
        table[role] = (sum(delta[p][2] for p in pids) * ms, sum(delta[p][0] for p in pids) / jobs)
    table["job processes"] = (sum(delta[p][3] for p in zygotes) * ms, sum(delta[p][1] for p in zygotes) / jobs)
    named = sum(cpu for cpu, _ in table.values())
    table["everything else"] = (busy_s * 1000 / jobs - named, None)
    return table


def machine_busy_s() -> float:
    """CPU seconds this machine has spent busy (not idle, not waiting for I/O) since boot."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def per_job(run: Callable[[], bool], jobs: int, rest_jobs: int = 0, split: bool = False) -> PerJob:
    """One job's wall time, back to back (median, p99, the machine's CPU a job, split among a pool's processes)
    and at rest (median), in ms."""
    times, busy, before = [], machine_busy_s(), processes()
    for _ in range(jobs):
        started = time.perf_counter()
        assert run(), "a trivial job must pass"
        times.append(time.perf_counter() - started)
    busy = machine_busy_s() - busy
    times.sort()
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    measured = PerJob(statistics.median(times) * 1000, p99 * 1000, busy / jobs * 1000)
    measured.roles = roles(before, processes(), jobs, busy) if split else None
    at_rest = []
    for _ in range(rest_jobs):
        time.sleep(REST_S)
        started = time.perf_counter()
        assert run(), "a trivial job must pass"
        at_rest.append(time.perf_counter() - started)
    measured.rest_ms = statistics.median(at_rest) * 1000 if at_rest else None
    return measured


def throughput_s(run: Callable[[], bool], candidates: int) -> float:
    started = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        assert all(pool.map(lambda _: run(), range(candidates)))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=30)
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--smoke", action="store_true", help="a tiny size, to prove the script still runs (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.jobs, args.candidates = 3, 4
    rows: list[tuple[str, PerJob, float | None]] = []
    bare = one_shot([sys.executable, "-c", HARNESS_SOURCE])
    rows.append(("bare host subprocess (reference)", per_job(bare, args.jobs), throughput_s(bare, args.candidates)))
    docker_run = one_shot(
        [
            "docker",
            "run",
            "-i",
            "--rm",
            "--network",
            "none",
            "--read-only",
            "--user",
            "65534:65534",
            "--cap-drop",
            "ALL",
            DEFAULT_IMAGE,
            "python3",
            "-c",
            HARNESS_SOURCE,
        ]
    )
    try:
        rows.append(("docker run per job", per_job(docker_run, max(5, args.jobs // 3)), None))
    except (subprocess.SubprocessError, OSError, IndexError, ValueError) as exc:
        print(f"docker run per job: unavailable ({type(exc).__name__})")
    for name in ("docker", "bwrap"):
        try:
            sandbox = open_sandbox(name)
        except SandboxError as exc:
            print(f"{name}: unavailable ({exc})")
            continue
        with sandbox:

            def pooled(box=sandbox) -> bool:
                return box.run(PROGRAM, TESTS).passed

            per_job(pooled, 3)  # warm-up
            measured = per_job(pooled, args.jobs * 10, rest_jobs=args.jobs * 3, split=True)
            rows.append((f"{name} warm pool", measured, throughput_s(pooled, args.candidates)))
    bare, bare_throughput = rows[0][1], rows[0][2] or 1.0
    print(
        f"per job: trivial program, {len(TESTS)} tests; "
        f"throughput: {args.candidates} candidates × {len(TESTS)} tests, concurrency 2"
    )
    print(
        f"{'path':34} {'median ms/job':>14} {'p99 ms':>8} {'of bare':>8} {'at rest ms':>11} {'of bare':>8}"
        f" {'CPU ms/job':>11} {'throughput s':>13} {'× bare':>7}"
    )
    for name, job, seconds in rows:
        ratio = f"{seconds / bare_throughput:7.2f}" if seconds else "      -"
        rest = f"{job.rest_ms:11.2f} {job.rest_ms / bare.median_ms:8.3f}" if job.rest_ms else f"{'-':>11} {'-':>8}"
        print(
            f"{name:34} {job.median_ms:14.2f} {job.p99_ms:8.2f} {job.median_ms / bare.median_ms:8.3f} {rest}"
            f" {job.cpu_ms:11.2f} {seconds if seconds else float('nan'):13.2f} {ratio}"
        )
    pools = [(name, job.roles) for name, job, _ in rows if job.roles]  # split for the pools only
    print("\nwhere a pool's CPU goes, per job back to back: CPU ms (minor page faults)")
    print(f"{'process':34} " + " ".join(f"{name:>22}" for name, _ in pools))
    for role in pools[0][1] if pools else ():
        cells = [
            f"{cpu:.2f}" + (f" ({faults:.0f})" if faults is not None else "")
            for cpu, faults in (r[role] for _, r in pools)
        ]
        print(f"{role:34} " + " ".join(f"{cell:>22}" for cell in cells))


if __name__ == "__main__":
    main()
