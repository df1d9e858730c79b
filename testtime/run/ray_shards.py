"""`run --ray ADDRESS --shards N`: a batch run's N shards as Ray tasks on a cluster, merged into one run directory.

Each task opens (or resumes) its shard's run directory, `OUT/shards/I-of-N/`, and runs it with its own backend
and sandbox: one shard is an ordinary `--shard I/N` run, so everything that holds for a run (resume from the
cache, ledger, trace, labels graded outside the method) holds for it. The driver shows progress as shard
results land, appends them to `OUT/results.jsonl` as they come, and once every shard has finished writes the
merged run (`merge.write_merged`: results in the unsharded order, summary recomputed).

Failures: a worker (or its node) that dies is a system failure, which Ray retries on another worker: the
retried task resumes the shard from its directory, so samples already paid come back from its cache. A driver
that dies takes its tasks with it; `run --resume OUT [--ray ADDRESS]` submits the unfinished shards again.
The run directory must lie on a filesystem every node mounts at the same path (one machine trivially does);
a task that cannot see it fails at once, saying so.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from testtime.core.errors import UserError
from testtime.core.ledger import LedgerTotals
from testtime.core.results import ResultRecord
from testtime.evaluation.summary import RunSummary
from testtime.run.directory import RunDir
from testtime.run.lifecycle import OpenRun, create_or_resume
from testtime.run.merge import merged_records, write_merged
from testtime.run.observer import ProgressPlan, RunObserver
from testtime.run.ray_guard import guard_descendants
from testtime.run.settings import RunSettings
from testtime.run.shard import shard_name

TASK_RETRIES = 3  # a dead worker's shard is tried again this often (each try resumes it)
POLL_S = 0.5


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UserError("--ray needs Ray on this machine and the cluster: pip install 'testtime[ray]'") from None
    return ray


def shard_folder(out: Path, index: int, count: int) -> Path:
    return out / "shards" / shard_name(index, count)


def run_shard(settings_json: str, folder: str) -> str:
    """The Ray task: run (or resume) one shard in `folder`; its summary as JSON. Runs on a worker."""
    from testtime.run.execute import execute

    path = Path(folder)
    if not path.parent.is_dir():
        import socket

        raise UserError(
            f"{path.parent} is not visible on {socket.gethostname()}: a Ray run's --out must lie on a filesystem "
            "every node mounts at the same path"
        )
    settings = RunSettings.model_validate_json(settings_json)
    return execute(create_or_resume(settings, path)).model_dump_json(by_alias=True)


def connect(address: str) -> Any:
    """`local`: a Ray instance of this process's own; `auto`: the cluster RAY_ADDRESS or `ray start` names;
    else a cluster's address (host:port, or ray://host:10001 for Ray Client)."""
    ray = import_ray()
    if not ray.is_initialized():
        if address == "local":  # a new instance ("local" never attaches to one already running here)
            guard_descendants()  # the instance is ours: none of its processes may outlive this driver
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise UserError(f"--ray {address}: cannot reach the cluster ({str(exc).splitlines()[0]})") from None
    return ray


def execute_on_ray(run: OpenRun, address: str, observer: RunObserver) -> RunSummary:
    """Run every unfinished shard of the opened Ray run and merge them into it; the merged summary."""
    run.parts.close()  # the driver only checked the settings with them: each task builds its own
    directory, settings, total = run.directory, run.settings, len(run.parts.problems)
    count = settings.shards or 1
    ray = connect(address)
    task = ray.remote(num_cpus=1, max_retries=TASK_RETRIES, retry_exceptions=False)(run_shard)
    folders = [shard_folder(directory.path, i, count) for i in range(1, count + 1)]
    (directory.path / "shards").mkdir(exist_ok=True)
    pending = {}
    for index, folder in enumerate(folders, 1):
        if _finished(folder):
            continue
        shard_settings = settings.model_copy(update={"shard": f"{index}/{count}", "shards": None})
        pending[task.remote(shard_settings.model_dump_json(), str(folder))] = folder
    seen = _Landed(directory, folders)
    observer.start(ProgressPlan(problems=total, done=seen.count(), totals=LedgerTotals()))
    started = time.perf_counter()
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_S)
            for record in seen.new():
                observer.problem_done(record, 0)
            for ref in ready:
                pending.pop(ref)
                try:
                    ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    cause = exc.cause if isinstance(exc.cause, Exception) else exc
                    raise UserError(f"a shard failed: {str(cause).splitlines()[0]}") from None
        for record in seen.new():
            observer.problem_done(record, 0)
    finally:
        observer.stop()
    shards = [(RunDir(f), RunDir(f).read_manifest()) for f in folders]
    write_merged(
        directory, shards, merged_records(shards), folders, wall_s=time.perf_counter() - started, ray_shards=count
    )
    run.release()
    summary = directory.read_summary()
    assert summary is not None
    return summary


def _finished(folder: Path) -> bool:
    if not (folder / "summary.json").is_file():
        return False
    summary = RunDir(folder).read_summary()
    return summary is not None and summary.complete


class _Landed:
    """Shard results as they land, appended to the top directory's results.jsonl in arrival order (the merge
    rewrites it in the unsharded order at the end)."""

    def __init__(self, directory: RunDir, folders: list[Path]) -> None:
        self.directory, self.folders = directory, folders
        self.known: set[str] = {r.problem_id for r in directory.read_results()}
        self.sizes: dict[Path, int] = {}

    def count(self) -> int:
        return len(self.known)

    def new(self) -> list[ResultRecord]:
        landed = []
        for folder in self.folders:
            results = folder / "results.jsonl"
            size = results.stat().st_size if results.exists() else 0
            if size == self.sizes.get(folder, 0):
                continue
            self.sizes[folder] = size
            for record in RunDir(folder).read_results():
                if record.problem_id not in self.known:
                    self.known.add(record.problem_id)
                    self.directory.append_result(record)
                    landed.append(record)
        return landed
