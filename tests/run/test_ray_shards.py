"""`run --ray`: shards as Ray tasks on a local cluster of this machine (a head and two worker nodes, each its
own raylet and worker processes). A worker node killed mid-run: its shard is retried elsewhere and resumes from
its directory. The driver killed mid-run: `--resume` submits the unfinished shards. Both end equal to the
unsharded run on a deterministic model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from testtime.core.ledger import read_entries

N = 3
RUN = ("run", "--method", "majority", "--bench", "arith", "--limit", "12", "--n", str(N), "--quiet")
SLOW_MODEL = ("--model", "fake:echo,latency=0.4", "--concurrency", "1")  # about 5 s a shard: time to kill


def results(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]


def shard_results(run: Path) -> int:
    return sum(len(p.read_text().splitlines()) for p in run.glob("shards/*/results.jsonl"))


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    pytest.importorskip("ray", reason="needs Ray: bash scripts/install --verl (or pip install 'testtime[ray]')")
    from ray.cluster_utils import Cluster

    local = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    for _ in range(2):
        local.add_node(num_cpus=1)
    local.wait_for_nodes()
    yield local
    local.shutdown()


@pytest.fixture(scope="module")
def unsharded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("whole") / "run"
    done = subprocess.run(
        [sys.executable, "-m", "testtime.cli", *RUN, *SLOW_MODEL[:2], "--out", str(out)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return out


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "testtime.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def wait_for(condition: Callable[[], bool], patience: float = 120) -> None:
    deadline = time.time() + patience
    while not condition():
        assert time.time() < deadline, "timed out"
        time.sleep(0.1)


def assert_equal_to_unsharded(run: Path, unsharded: Path) -> None:
    assert results(run) == results(unsharded)
    mine, theirs = (json.loads((r / "summary.json").read_text()) for r in (run, unsharded))
    assert mine["complete"] and mine["accuracy"] == theirs["accuracy"] and mine["maj@k"] == theirs["maj@k"]
    # Every sample was paid for once; a sample in flight when its worker died may be paid again, never more.
    paid = Counter((e.problem_id, e.sample_index) for e in read_entries(run / "ledger.jsonl") if not e.cached)
    assert set(paid) == {(r["problem_id"], i) for r in results(unsharded) for i in range(N)}
    assert sum(paid.values()) <= len(paid) + 2


@pytest.mark.slow
@pytest.mark.extras
def test_a_worker_killed_mid_run_is_retried_and_the_merge_equals_the_unsharded_run(
    cluster: object, unsharded: Path, tmp_path: Path
) -> None:
    out = tmp_path / "ray"
    driver = start(*RUN, *SLOW_MODEL, "--ray", cluster.address, "--shards", "2", "--out", str(out))  # type: ignore[attr-defined]
    wait_for(lambda: shard_results(out) >= 2)
    victim = next(iter(cluster.worker_nodes))  # type: ignore[attr-defined]
    cluster.remove_node(victim)  # type: ignore[attr-defined]  # its raylet and its workers die
    _, stderr = driver.communicate(timeout=240)
    cluster.add_node(num_cpus=1)  # type: ignore[attr-defined]  # for the next test
    assert driver.returncode == 0, stderr
    assert_equal_to_unsharded(out, unsharded)
    manifest = json.loads((out / "config.json").read_text())
    assert manifest["run"]["shards"] == 2 and len(manifest["merged_from"]) == 2
    assert json.loads((out / "summary.json").read_text())["wall_s"] > 0  # the driver's wall clock


@pytest.mark.slow
@pytest.mark.extras
def test_a_killed_driver_resumes_only_the_unfinished_shards(cluster: object, unsharded: Path, tmp_path: Path) -> None:
    out = tmp_path / "ray"
    address = cluster.address  # type: ignore[attr-defined]
    driver = start(*RUN, *SLOW_MODEL, "--ray", address, "--shards", "3", "--out", str(out))
    wait_for(lambda: shard_results(out) >= 3)
    os.kill(driver.pid, signal.SIGKILL)  # no clean-up at all: Ray ends the dead driver's tasks
    driver.communicate(timeout=60)
    assert not (out / "summary.json").exists()
    done_before = {r["problem_id"] for p in out.glob("shards/*/results.jsonl") for r in results(p.parent)}
    resumed_at = time.time()
    resumed = start("run", "--resume", str(out), "--ray", address)
    _, stderr = resumed.communicate(timeout=240)
    assert resumed.returncode == 0, stderr
    assert_equal_to_unsharded(out, unsharded)
    # Problems finished before the kill cost nothing more: the resume paid only for the others.
    later = [e for e in read_entries(out / "ledger.jsonl") if e.time > resumed_at and not e.cached]
    assert len(done_before) >= 3 and later and not {e.problem_id for e in later} & done_before


def test_without_ray_the_flag_is_a_one_line_error(testtime_process: Callable, tmp_path: Path) -> None:
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "ray.py").write_text("raise ImportError('No module named ray')\n")
    done = testtime_process(  # a process of its own: the shim must shadow Ray before anything imports it
        *RUN, "--model", "fake:echo", "--ray", "local", "--out", str(tmp_path / "r"), env={"PYTHONPATH": str(shim)}
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "--ray needs Ray" in done.stderr and "pip install 'testtime[ray]'" in done.stderr


def test_shards_without_ray_and_ray_with_a_shard_are_refused(testtime_cli: Callable, tmp_path: Path) -> None:
    alone = testtime_cli(*RUN, "--model", "fake:echo", "--shards", "2", "--out", str(tmp_path / "a"))
    assert alone.returncode != 0 and "add --ray" in alone.stderr
    both = testtime_cli(*RUN, "--model", "fake:echo", "--ray", "local", "--shard", "1/2", "--out", str(tmp_path / "b"))
    assert both.returncode != 0 and "leave out --shard" in both.stderr


@pytest.mark.extras
def test_a_local_ray_instance_does_not_outlive_its_killed_driver() -> None:
    """`--ray local` starts Ray's head in the driver; after a kill -9 of the driver its dashboard and runtime-env
    agents used to live on, re-parented to init. Every process the driver started is gone now."""
    pytest.importorskip("ray", reason="needs Ray: bash scripts/install --verl (or pip install 'testtime[ray]')")
    import psutil

    script = "from testtime.run.ray_shards import connect\nconnect('local')\nprint('up', flush=True)\n"
    driver = subprocess.Popen(
        [sys.executable, "-c", script + "import time\ntime.sleep(600)"], stdout=subprocess.PIPE, text=True
    )
    assert driver.stdout is not None and driver.stdout.readline().strip() == "up"
    time.sleep(2)  # the raylet's agents start a moment after the head
    started = {p.pid: p.create_time() for p in psutil.Process(driver.pid).children(recursive=True)}
    names = " ".join(psutil.Process(pid).name() for pid in started)
    assert "raylet" in names and len(started) >= 4, names
    driver.kill()
    driver.wait()

    def alive() -> list[int]:
        living = []
        for pid, created in started.items():
            try:
                if psutil.Process(pid).create_time() == created and psutil.Process(pid).status() != "zombie":
                    living.append(pid)
            except psutil.Error:
                continue
        return living

    wait_for(lambda: not alive(), patience=30)
