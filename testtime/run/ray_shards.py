"""`run --ray ADDRESS --shards N`: a batch run's N shards as Ray tasks on a cluster, merged into one run directory.

Each task opens (or resumes) its shard's run directory, `OUT/shards/I-of-N/`, and runs it with its own backend
and sandbox: one shard is an ordinary `--shard I/N` run, so everything that holds for a run (resume from the
cache, ledger, trace, labels graded outside the method) holds for it. The driver runs the same loop
(`run/loop.py`) fed by the shards' results as they land (`LandedShards`): it shows progress and appends them
to `OUT/results.jsonl` as they come, and once every shard has finished writes the merged run
(`merge.write_merged`: results in the unsharded order, graded again, summary recomputed).

Failures: a worker (or its node) that dies is a system failure, which Ray retries on another worker: the
retried task resumes the shard from its directory, so samples already paid come back from its cache. A driver
that dies takes its tasks with it; `run --resume OUT [--ray ADDRESS]` submits the unfinished shards again.
The run directory must lie on a filesystem every node mounts at the same path (one machine trivially does);
a task that cannot see it fails at once, saying so.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from testtime.core.errors import UserError
from testtime.core.ledger import LedgerTotals
from testtime.core.records import Problem
from testtime.core.results import Grading, ProblemResult, ResultRecord
from testtime.evaluation.summary import RunSummary
from testtime.methods.learner import Learner
from testtime.run.directory import RunDir
from testtime.run.lifecycle import OpenRun, create_or_resume
from testtime.run.loop import Arrival, Session, Source
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
    source = LandedShards(ray, pending, directory, folders, {p.id: p for p in run.parts.problems})
    observer.start(ProgressPlan(problems=total, done=len(source.known_ids), totals=LedgerTotals()))
    session = Session(
        directory,
        engine=None,
        grade=source.grading,
        on_result=lambda record: observer.problem_done(record, 0),
    )
    started = time.perf_counter()
    try:
        asyncio.run(session.drive(source, Relayed(source), concurrency=1))
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


class LandedShards(Source):
    """A Ray run's arrivals at its driver: each shard's results as they land in the shard's directory (the shard
    answered and graded them through its own loop), until every task has returned. The driver's loop appends
    them to the top results.jsonl in landing order and shows progress; the merge then rewrites the results in
    the unsharded order, graded again against the sealed references."""

    ordered = True  # nothing is answered here: each arrival is appended as it lands

    def __init__(
        self, ray: Any, pending: dict[Any, Path], directory: RunDir, folders: list[Path], problems: dict[str, Problem]
    ) -> None:
        self.ray, self.pending, self.directory, self.folders, self.problems = ray, pending, directory, folders, problems
        self.known_ids: set[str] = {r.problem_id for r in directory.read_results()}
        self.landed: dict[str, ResultRecord] = {}
        self.sizes: dict[Path, int] = {}

    async def arrivals(self) -> AsyncIterator[Arrival]:
        while True:
            ready = []
            if self.pending:
                ready, _ = await asyncio.to_thread(self.ray.wait, list(self.pending), num_returns=1, timeout=POLL_S)
            for record in self._new():
                yield Arrival(self.problems[record.problem_id], reference=None)
            if not self.pending:
                return
            for ref in ready:
                self.pending.pop(ref)
                try:
                    self.ray.get(ref)
                except self.ray.exceptions.RayTaskError as exc:
                    cause = exc.cause if isinstance(exc.cause, Exception) else exc
                    raise UserError(f"a shard failed: {str(cause).splitlines()[0]}") from None

    def grading(self, arrival: Arrival, result: ProblemResult) -> Grading:
        """The shard's own grade, as it landed (the merge grades every result again)."""
        return self.landed[arrival.problem.id]

    def outcome(self, records: Sequence[ResultRecord]) -> dict[str, Any]:
        return {}  # the merge writes the outcome of a Ray run

    def _new(self) -> list[ResultRecord]:
        landed = []
        for folder in self.folders:
            results = folder / "results.jsonl"
            size = results.stat().st_size if results.exists() else 0
            if size == self.sizes.get(folder, 0):
                continue
            self.sizes[folder] = size
            for record in RunDir(folder).read_results():
                if record.problem_id not in self.known_ids:
                    self.known_ids.add(record.problem_id)
                    self.landed[record.problem_id] = record
                    landed.append(record)
        return landed


class Relayed(Learner):
    """What answers at a Ray run's driver: the shards' own answers, relayed as they landed."""

    kind = "none"

    def __init__(self, source: LandedShards) -> None:
        self.source = source

    @property
    def state(self) -> int:
        return 0

    async def answer(self, problem: Problem, arrival: int | None) -> ProblemResult:
        return self.source.landed[problem.id].ungraded()
