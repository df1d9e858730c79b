"""Sandbox cost: per-job overhead (trivial program, 20 tests) and throughput (100 candidates × 20 tests at
concurrency 2), side by side in one run.

Rows: bare host subprocess (a fresh `python3` running the harness per job, no isolation: reference only),
`docker run` per job, the Docker warm pool, and the bubblewrap pool: each job's median and p99 and the median's
share of the bare subprocess's. Goals: each pool's median ≤ 0.02 of the bare subprocess's (a job costs about a
fork of a warm harness, not an interpreter's start); throughput within 1.5× of the bare host run.

    .venv/bin/python perf/sandbox.py [--jobs 30] [--candidates 100]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from testtime.core.records import TestCase
from testtime.sandbox import SandboxError
from testtime.sandbox.choose import open_sandbox
from testtime.sandbox.docker_backend import DEFAULT_IMAGE
from testtime.sandbox.judge import judge
from testtime.sandbox.pool import HARNESS_SOURCE

PROGRAM = "n = int(input())\nprint(n + 1)"
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


def per_job_ms(run: Callable[[], bool], jobs: int) -> tuple[float, float]:
    """Median and p99 of one job's wall time, in ms."""
    times = []
    for _ in range(jobs):
        started = time.perf_counter()
        assert run(), "a trivial job must pass"
        times.append(time.perf_counter() - started)
    times.sort()
    return statistics.median(times) * 1000, times[min(len(times) - 1, int(len(times) * 0.99))] * 1000


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
    rows: list[tuple[str, tuple[float, float], float | None]] = []
    bare = one_shot([sys.executable, "-c", HARNESS_SOURCE])
    rows.append(("bare host subprocess (reference)", per_job_ms(bare, args.jobs), throughput_s(bare, args.candidates)))
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
        rows.append(("docker run per job", per_job_ms(docker_run, max(5, args.jobs // 3)), None))
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

            per_job_ms(pooled, 3)  # warm-up
            pool_row = (f"{name} warm pool", per_job_ms(pooled, args.jobs * 10), throughput_s(pooled, args.candidates))
            rows.append(pool_row)
    bare_ms, bare_throughput = rows[0][1][0], rows[0][2] or 1.0
    print(
        f"per job: trivial program, {len(TESTS)} tests; "
        f"throughput: {args.candidates} candidates × {len(TESTS)} tests, concurrency 2"
    )
    print(f"{'path':34} {'median ms/job':>14} {'p99 ms':>8} {'of bare':>8} {'throughput s':>13} {'× bare':>7}")
    for name, (median, p99), seconds in rows:
        ratio = f"{seconds / bare_throughput:7.2f}" if seconds else "      -"
        share = f"{median / bare_ms:8.3f}"
        print(f"{name:34} {median:14.2f} {p99:8.2f} {share} {seconds if seconds else float('nan'):13.2f} {ratio}")


if __name__ == "__main__":
    main()
