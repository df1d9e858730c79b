"""What a program can do to the host and its neighbours when testtime runs as root (as CI and GPU boxes do):
write host kernel settings, or take every core so a neighbouring job's verdicts flip to time_limit."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from testtime.core.records import TestCase
from testtime.sandbox import Limits, Sandbox
from testtime.sandbox.bwrap_backend import BwrapSandbox
from testtime.sandbox.cgroups import create_groups, hierarchy
from testtime.sandbox.probe_programs import CPU_HOG_CHILDREN, HOST_KERNEL_SETTINGS

from .conftest import _started

# These measure the machine's cores: beside other test workers a 0.25 s job can miss a 2 s limit for reasons that
# are not the hog's, so they run alone (scripts/test's serial pass).
SERIAL = pytest.mark.serial

# Children that leave their session and spin until the job's worker is torn down.
HOG = """import os, time
for _ in range(16):
    if os.fork() == 0:
        os.setsid()
        while True:
            pass
time.sleep(6)
print("done")"""
# Each test does ~0.25 s of CPU work: far inside 2 s on one core, over it with 1/17 of two cores.
VICTIM = "total = 0\nfor i in range(4_000_000):\n    total += i\nprint(input())"


def test_kernel_settings_probe_catches_a_writable_proc_sys() -> None:
    """The probe is not vacuous: it names a writable file under /proc/sys when one exists (here, on the host,
    as root, the host's own settings are writable: the probe opens, never writes)."""
    if os.geteuid() != 0:
        pytest.skip("only root can write the host's /proc/sys")
    namespace: dict[str, object] = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(HOST_KERNEL_SETTINGS, namespace)
    assert "/proc/sys" in out.getvalue()


@pytest.mark.parametrize("name", ["bwrap", "docker"])
def test_no_host_kernel_setting_is_writable_from_a_job(name: str) -> None:
    with _started(name, pool_size=1) as sandbox:
        report = sandbox.run(HOST_KERNEL_SETTINGS, [TestCase(input="", output="ok")], Limits(timeout_s=10.0))
    assert report.passed, report.tests[0].output


def test_bwrap_started_by_root_runs_as_an_unprivileged_host_user() -> None:
    if os.geteuid() != 0:
        pytest.skip("the privilege drop is for root")
    with _started("bwrap", pool_size=1) as sandbox:
        sandbox.run("print(1)", [TestCase(input="", output="1")])
        assert isinstance(sandbox, BwrapSandbox)
        worker = sandbox._idle.queue[0]  # type: ignore[attr-defined]
        # the worker's process: sh joined the cgroups as root, then exec'd setpriv, which exec'd bwrap
        status = Path(f"/proc/{worker.process.pid}/status").read_text()
    real, effective, saved, filesystem = status.split("Uid:")[1].split("\n")[0].split()
    assert {real, effective, saved, filesystem} == {"65534"}


def _cpu_used(sandbox: Sandbox) -> str:
    return sandbox.run(CPU_HOG_CHILDREN, [TestCase(input="", output="ok")]).tests[0].output


@SERIAL
def test_cpu_probe_catches_an_unbounded_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no CPU bound (`cpus=None`, no cgroup) a worker's setsid children take both cores: the probe says so."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one core: an unbounded worker cannot exceed one CPU")
    on_host = subprocess.run([sys.executable, "-c", CPU_HOG_CHILDREN], capture_output=True, text=True).stdout
    if on_host.strip() == "ok":
        pytest.skip("this machine is too busy for the probe's children to exceed one CPU even on the host")
    monkeypatch.setattr("testtime.sandbox.bwrap_backend.create_groups", lambda *args: [])  # scheduled as the host's
    with _started("bwrap", pool_size=1, cpus=None) as sandbox:
        assert "CPU-seconds" in _cpu_used(sandbox)


@SERIAL
def test_without_a_cgroup_the_harness_throttles_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where no cgroup can be made (an unprivileged user without delegation), PID 1's throttle holds instead."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one core: an unbounded worker cannot exceed one CPU")
    monkeypatch.setattr("testtime.sandbox.bwrap_backend.create_groups", lambda *args: [])
    with _started("bwrap", pool_size=1) as sandbox:
        assert _cpu_used(sandbox) == "ok\n"
        assert sandbox.run("print(input())", [TestCase(input="7", output="7")]).passed


@SERIAL
@pytest.mark.parametrize("name", ["bwrap", "bwrap-throttle", "docker"])
def test_a_cpu_hog_does_not_flip_a_neighbours_verdicts(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs two cores: one per worker")
    if name == "bwrap" and hierarchy() is None:
        pytest.skip("no writable cgroup hierarchy here: bwrap-throttle covers this host")
    if name == "bwrap-throttle":  # no cgroup: the harness's own throttle
        monkeypatch.setattr("testtime.sandbox.bwrap_backend.create_groups", lambda *args: [])
    with _started(name.removesuffix("-throttle"), pool_size=2) as sandbox, ThreadPoolExecutor(2) as pool:
        hog = pool.submit(sandbox.run, HOG, [TestCase(input="", output=None)], Limits(timeout_s=8.0))
        time.sleep(1.0)  # the hog's children are spinning
        tests = [TestCase(input=str(i), output=str(i)) for i in range(3)]
        victim = sandbox.run(VICTIM, tests, Limits(timeout_s=2.0))
        hog.result()
    assert [t.verdict for t in victim.tests] == ["pass"] * 3, victim.tests


def test_v2_groups_carry_memory_pids_and_cpu_limits(tmp_path: Path) -> None:
    """The unified hierarchy's files, on a stand-in root (this host has cgroup v1): controllers enabled for
    children, one group with all three limits."""
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    assert hierarchy(tmp_path) == "v2"
    (group,) = create_groups("testtime-1-2-abc", 256, 32, 0.5, root=tmp_path)
    assert set((tmp_path / "cgroup.subtree_control").read_text().split()) == {"+memory", "+pids", "+cpu"}
    assert (group / "memory.max").read_text() == str(256 << 20)
    assert (group / "pids.max").read_text() == "32"
    assert (group / "cpu.max").read_text() == "50000 100000"


def test_v2_without_the_cpu_controller_is_no_hierarchy(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("memory pids\n")
    assert hierarchy(tmp_path) is None
    assert create_groups("testtime-1-2-abc", 256, 32, 1.0, root=tmp_path) == []
