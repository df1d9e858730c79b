"""Adversarial programs, one property per test, on every backend."""

from __future__ import annotations

import asyncio
import os
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from testtime.core.records import TestCase
from testtime.sandbox import Limits, Sandbox
from testtime.sandbox.probes import PROBES, Probe, run_probe


@pytest.mark.parametrize("probe", PROBES, ids=[p.name.replace(" ", "-") for p in PROBES])
def test_isolation_property(solo: Sandbox, probe: Probe) -> None:
    held, report = run_probe(solo, probe)
    assert held, f"{probe.name} does not hold on {solo.name}: {report.tests}"


HELD_DESCRIPTORS = """import os
kinds = []
for name in os.listdir("/proc/self/fd"):
    try:
        target = os.readlink(f"/proc/self/fd/{name}")
    except OSError:
        continue  # the listing's own descriptor
    if int(name) > 2:
        kinds.append(target.split(":[")[0].removeprefix("/").removesuffix(" (deleted)"))
print(sorted(kinds))"""


def test_a_job_process_holds_no_descriptor_but_its_own(backend: Sandbox) -> None:
    """Beyond stdio, a program finds its stdin and stdout memfds and its job process's report and nudge pipes:
    not the harness's channel to the host, the zygote's socket or pidfds, nor /dev/null; job after job."""
    own = str(["memfd:stdin", "memfd:stdout", "pipe", "pipe"])
    for _ in range(3):
        assert backend.run(HELD_DESCRIPTORS, [TestCase(input="", output=own)] * 2).passed


def test_time_verdict_comes_within_the_bound(backend: Sandbox) -> None:
    report = backend.run("while True: pass", [TestCase(input="", output="")] * 2, Limits(timeout_s=1.0))
    assert [t.verdict for t in report.tests] == ["time_limit", "time_limit"]
    assert report.seconds < 2 * (1.0 + 1.0) + 3.0  # per-test bound plus the watchdog's grace, plus restart


def test_a_misbehaving_job_does_not_affect_the_next(backend: Sandbox) -> None:
    backend.run("import os\nwhile True: os.fork()", [TestCase(input="", output="")], Limits(timeout_s=2.0))
    assert backend.run("print(input()[::-1])", [TestCase(input="abc", output="cba")]).passed


def test_a_job_with_no_tests_keeps_its_worker(backend: Sandbox) -> None:
    """Its job process, handed a job with nothing to run, ends with the job, not swept up as a leftover, which
    replaced the worker (72 ms under bwrap, 400 under Docker) after every such job."""
    spawned: list[int] = []
    original = backend._spawn  # type: ignore[attr-defined]
    backend._spawn = lambda: spawned.append(1) or original()  # type: ignore[attr-defined]
    try:
        for _ in range(3):
            assert not backend.run("print(1)", []).passed
        for _ in range(4):  # each worker's next job reads its cleanup's verdict
            assert backend.run("print(input())", [TestCase(input="x", output="x")]).passed
    finally:
        del backend._spawn  # type: ignore[attr-defined]
    assert spawned == []


def test_a_job_that_stops_every_process_it_can_costs_its_worker_nothing(backend: Sandbox) -> None:
    """`kill(-1, SIGSTOP)` stopped the zygote, and the worker was replaced after every such job (6.4-7.2 s each,
    counted here as replacements, not timed): the zygote is continued instead."""
    stopper = "import os, signal\nprint(input(), flush=True)\nos.kill(-1, signal.SIGSTOP)"
    spawned: list[int] = []
    original = backend._spawn  # type: ignore[attr-defined]
    backend._spawn = lambda: spawned.append(1) or original()  # type: ignore[attr-defined]
    try:
        for _ in range(3):
            assert backend.run(stopper, [TestCase(input="x", output="x")]).passed
            assert backend.run("print(input())", [TestCase(input="y", output="y")]).passed
    finally:
        del backend._spawn  # type: ignore[attr-defined]
    assert spawned == []


def test_eight_concurrent_jobs_get_independent_verdicts(backend: Sandbox) -> None:
    program = "n = int(input())\nprint(n * n)"

    def job(n: int) -> bool:
        right = backend.run(program, [TestCase(input=str(n), output=str(n * n))]).passed
        wrong = backend.run(program, [TestCase(input=str(n), output=str(n * n + 1))]).passed
        return right and not wrong

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(job, range(8)))


def test_the_host_environment_is_not_inherited(backend: Sandbox) -> None:
    report = backend.run("import os\nprint(sorted(os.environ))", [TestCase(input="", output="")])
    assert "TESTTIME_PROBE_SECRET" in os.environ
    assert "TESTTIME_PROBE_SECRET" not in report.tests[0].output


def test_a_stopped_zygote_costs_the_next_job_no_wait(solo: Sandbox) -> None:
    """A program that SIGSTOPs the zygote used to cost the next job the host's 30 s wait for a worker that
    would never answer; the harness now notices at its cleanup and the worker is replaced at once."""
    import time

    from testtime.sandbox.probe_programs import STOP_ZYGOTE

    solo.run(STOP_ZYGOTE, [TestCase(input="", output=None)])
    started = time.perf_counter()
    report = solo.run("print(input())", [TestCase(input="next", output="next")])
    assert report.passed and time.perf_counter() - started < 10.0


def test_workers_replaced_inside_one_event_loop_serve_the_next(backend: Sandbox) -> None:
    """`arun` replaces a worker from an executor thread, which ends with its `asyncio.run`; bwrap's
    --die-with-parent follows the thread that started it, so a replacement started there was SIGKILLed once
    the loop closed and the next job failed with "worker did not start". A job with no tests leaves its
    program behind, so the next `_take` replaces both workers."""
    echo = [TestCase(input="abc", output="cba")]

    async def both(tests: list[TestCase]) -> list[bool]:
        reports = await asyncio.gather(*(backend.arun("print(input()[::-1])", tests) for _ in range(2)))
        return [r.passed for r in reports]

    for _ in range(3):
        asyncio.run(both([]))
        assert asyncio.run(both(echo)) == [True, True]
        time.sleep(0.2)  # the loop's executor threads are gone by now
        assert asyncio.run(both(echo)) == [True, True]
