"""Sandbox cost: per-job overhead (trivial program, 20 tests) and throughput (100 candidates × 20 tests at
concurrency 2), side by side in one run.

Rows: bare host subprocess (a fresh `python3` running the harness per job, no isolation: reference only),
`docker run` per job, the Docker warm pool, and the bubblewrap pool: each job's median and p99 with jobs back to
back, and the median's share of the bare subprocess's; the median of a job sent to a pool at rest (5 ms after
the last one, its cleanup done); and the machine's CPU per job while jobs ran back to back (all processes, from
/proc/stat: on 2 cores, back-to-back jobs cannot take less wall time than half of it). Goals: each pool's median
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


def machine_busy_s() -> float:
    """CPU seconds this machine has spent busy (not idle, not waiting for I/O) since boot."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def per_job(run: Callable[[], bool], jobs: int, rest_jobs: int = 0) -> PerJob:
    """One job's wall time, back to back (median, p99, the machine's CPU a job) and at rest (median), in ms."""
    times, busy = [], machine_busy_s()
    for _ in range(jobs):
        started = time.perf_counter()
        assert run(), "a trivial job must pass"
        times.append(time.perf_counter() - started)
    cpu_ms = (machine_busy_s() - busy) / jobs * 1000
    times.sort()
    p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
    measured = PerJob(statistics.median(times) * 1000, p99 * 1000, cpu_ms)
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
            measured = per_job(pooled, args.jobs * 10, rest_jobs=args.jobs * 3)
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


if __name__ == "__main__":
    main()
