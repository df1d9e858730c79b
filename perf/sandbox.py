"""Sandbox cost: per-job overhead (trivial program, 20 tests) and throughput (100 candidates × 20 tests at
concurrency 2), side by side in one run.

Rows: bare host subprocess (a fresh `python3` running the harness per job, no isolation: reference only),
`docker run` per job, the Docker warm pool, and the bubblewrap pool. Goals: both pools ≤ 10 ms
median per job; throughput within 1.5× of the bare host run.

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


def median_ms(run: Callable[[], bool], jobs: int) -> float:
    times = []
    for _ in range(jobs):
        started = time.perf_counter()
        assert run(), "a trivial job must pass"
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


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
    rows: list[tuple[str, float, float | None]] = []
    bare = one_shot([sys.executable, "-c", HARNESS_SOURCE])
    rows.append(("bare host subprocess (reference)", median_ms(bare, args.jobs), throughput_s(bare, args.candidates)))
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
        rows.append(("docker run per job", median_ms(docker_run, max(5, args.jobs // 3)), None))
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

            median_ms(pooled, 3)  # warm-up
            rows.append((f"{name} warm pool", median_ms(pooled, args.jobs), throughput_s(pooled, args.candidates)))
    bare_throughput = rows[0][2] or 1.0
    print(
        f"per job: trivial program, {len(TESTS)} tests; "
        f"throughput: {args.candidates} candidates × {len(TESTS)} tests, concurrency 2"
    )
    print(f"{'path':34} {'median ms/job':>14} {'throughput s':>13} {'× bare':>7}")
    for name, ms, seconds in rows:
        ratio = f"{seconds / bare_throughput:7.2f}" if seconds else "      -"
        print(f"{name:34} {ms:14.1f} {seconds if seconds else float('nan'):13.2f} {ratio}")


if __name__ == "__main__":
    main()
