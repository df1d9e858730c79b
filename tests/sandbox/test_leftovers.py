"""What a job or a killed run leaves on the host: nothing that outlives it, and what a kill -9 leaves is
found, listed and removed. One property per test, on every backend."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testtime.core.records import TestCase
from testtime.sandbox import Limits, Sandbox, SandboxError
from testtime.sandbox.choose import open_sandbox
from testtime.sandbox.owner import leftovers, owner_state
from testtime.sandbox.probe_programs import DAEMON

# Any sandbox that starts reaps every dead owner's leftovers: beside a parallel test, the killed run these make
# would be cleaned by a stranger before they look.
pytestmark = pytest.mark.serial

REPO = Path(__file__).resolve().parents[2]


def _named(name: str) -> list[int]:
    """Host pids of processes called `name` (comm): a sandboxed program can name itself (prctl)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == name:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _gone(name: str, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while _named(name) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _named(name)


def test_time_limit_leaves_no_process_behind(solo: Sandbox) -> None:
    program = DAEMON.replace("tt-probe-daemon", "tt-tle-daemon").replace('print("forked")', "time.sleep(600)")
    report = solo.run(program, [TestCase(input="", output="")], Limits(timeout_s=1.0))
    assert report.tests[0].verdict == "time_limit" and report.recycled
    assert _gone("tt-tle-daemon")


def test_a_detached_daemon_is_gone_from_the_host_after_its_job(solo: Sandbox) -> None:
    report = solo.run(DAEMON, [TestCase(input="", output="forked")])
    assert report.passed  # the job itself was fine: it is what it left behind that must go
    solo.run("print(1)", [TestCase(input="", output="1")])  # the next job waits for the cleanup
    assert _gone("tt-probe-daemon")


def _docker_client() -> object | None:
    from testtime.sandbox.docker_backend import docker_client

    try:
        return docker_client()
    except SandboxError:
        return None


OWNER = """import sys, time
from testtime.core.records import TestCase
from testtime.sandbox.choose import open_sandbox
box = open_sandbox(sys.argv[1], pool_size=2)
box.run("print(1)", [TestCase(input="", output="1")])
print("ready", flush=True)
time.sleep(600)
"""


def _killed_owner(backend: str) -> int:
    """Start a run that opens a sandbox, then kill it with SIGKILL: it cannot clean up. Returns its pid."""
    process = subprocess.Popen(
        [sys.executable, "-c", OWNER, backend], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if line.strip() != "ready":
        pytest.skip(f"{backend} unavailable here: {process.stderr.read()[-300:] if process.stderr else ''}")
    process.send_signal(signal.SIGKILL)
    process.wait()
    return process.pid


def _left_by(pid: int, client: object | None) -> list[object]:
    """The dead resources the run killed as `pid` left: another process's leftovers (a parallel suite, a code
    evaluation on the same machine) come and go on their own, so a check looks at its own only."""
    return [x for x in leftovers(client) if x.state == "dead" and x.pid == pid]


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_a_starting_sandbox_reaps_what_a_killed_run_left(backend: str) -> None:
    client = _docker_client() if backend == "docker" else None
    pid = _killed_owner(backend)
    if client is not None:
        containers = client.containers.list(all=True, filters={"label": "testtime.sandbox"})  # type: ignore[attr-defined]
        dead = [c for c in containers if owner_state(c.labels.get("testtime.owner")) == "dead"]
        assert dead, "a killed run's containers carry its identity and are seen as dead"
    left = _left_by(pid, client)
    if backend == "bwrap" and not left:
        pytest.skip("no cgroups here: bubblewrap leaves nothing behind to reap")
    assert left, f"the run killed as pid {pid} left nothing to find"
    with open_sandbox(backend):
        pass
    assert not _left_by(pid, client)


def _dead_after_a_kill(backend: str) -> tuple[object | None, int, list[object]]:
    client = _docker_client() if backend == "docker" else None
    pid = _killed_owner(backend)
    dead = _left_by(pid, client)
    if not dead:
        pytest.skip("no cgroups here: bubblewrap leaves nothing behind")
    return client, pid, dead


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_check_lists_what_a_killed_run_left(backend: str, testtime_cli) -> None:  # type: ignore[no-untyped-def]
    _, _, dead = _dead_after_a_kill(backend)
    check = testtime_cli("sandbox", "check", "--sandbox", backend, timeout=300)
    assert check.returncode == 0, check.stderr
    assert all(x.describe() in check.stderr for x in dead), check.stderr


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_clean_removes_what_a_killed_run_left(backend: str, testtime_cli) -> None:  # type: ignore[no-untyped-def]
    client, pid, dead = _dead_after_a_kill(backend)
    cleaned = testtime_cli("sandbox", "clean")
    assert cleaned.returncode == 0, cleaned.stderr
    assert all(f"removed {x.describe()}" in cleaned.stderr for x in dead), cleaned.stderr
    assert not _left_by(pid, client)


def test_clean_never_touches_a_live_run(testtime_cli) -> None:  # type: ignore[no-untyped-def]
    try:
        box = open_sandbox("auto")
    except SandboxError as exc:
        pytest.skip(f"no sandbox: {exc}")
    with box:
        box.run("print(1)", [TestCase(input="", output="1")])
        live = {x.name for x in leftovers(_docker_client()) if x.state == "live"}
        assert live, "this process's own workers are live resources"
        cleaned = testtime_cli("sandbox", "clean")
        assert cleaned.returncode == 0, cleaned.stderr
        assert live <= {x.name for x in leftovers(_docker_client())}
        for _ in range(3):  # every worker still serves
            assert box.run("print(1)", [TestCase(input="", output="1")]).passed


def test_a_container_removed_while_listed_is_skipped_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs on one machine: one's sandbox lists the labelled containers while the other's closes and removes
    its own. The listing must not fail on the one that vanished (it crashed a sandbox's start: 404)."""
    from testtime.sandbox.owner import CONTAINER_LABEL, OWNER_LABEL, containers

    client = _docker_client()
    if client is None:
        pytest.skip("no Docker engine")
    image = next((t for i in client.images.list() for t in i.tags if t.startswith("testtime-sandbox")), None)
    if image is None:
        pytest.skip("no sandbox image (testtime sandbox build)")
    doomed = client.containers.create(image, "true", labels={CONTAINER_LABEL: "1", OWNER_LABEL: "elsewhere:1:1"})
    collection = type(client.containers)  # the client builds a new collection at each access: patch the class
    real_get = collection.get

    def vanished_first(self: object, container_id: str, *args: object, **kwargs: object) -> object:
        if doomed.id.startswith(container_id) or container_id.startswith(doomed.id):
            doomed.remove(force=True)  # the other run's close, between the listing and the inspection
        return real_get(self, container_id, *args, **kwargs)

    monkeypatch.setattr(collection, "get", vanished_first)
    listed = containers(client)
    assert doomed.name not in [leftover.name for leftover, _ in listed]
