"""The one place a run directory is created or opened: a new run, a resume (with changed budgets, a new
server, another timeout or concurrency), a replay, or a sub-run that is created the first time and resumed
after (ablate, `ttrl controls`, the miniature). Each returns an `OpenRun` that `execute` runs; other kinds of
run open here too, as another `kind` of manifest: served (`open_served`, which also continues one) and
streamed (`--stream`).

A directory has one writer at a time: opening it for writing takes a lock (released when the process ends,
kill -9 included), and a second writer is refused with the holder's pid.
"""

from __future__ import annotations

import fcntl
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from testtime.core.errors import UserError
from testtime.core.secrets import REDACTED, redact_url
from testtime.evaluation.caveats import plan_warnings
from testtime.evaluation.summary import RunSummary
from testtime.run.build import (
    RunParts,
    budget_warnings,
    build_parts,
    check_plan_size,
    check_run_flags,
    data_changed,
    tuned_set_note,
)
from testtime.run.directory import LOCK, RunDir, default_run_path
from testtime.run.manifest import Effective, Resumed, RunManifest, now
from testtime.run.settings import ResumeChanges, RunSettings, versions


@dataclass
class OpenRun:
    """A run directory opened for writing, with everything built to run in it."""

    directory: RunDir
    manifest: RunManifest
    parts: RunParts
    replay_of: RunDir | None = None  # a replay: the run whose cache answers every call
    notes: list[str] = field(default_factory=list)  # what opening did that a user should read (an upgrade)
    lock: IO[str] | None = None
    settings_used: RunSettings | None = None  # what runs, where it differs from the record (a URL's credential)

    @property
    def settings(self) -> RunSettings:
        return self.settings_used or self.manifest.run

    @property
    def path(self) -> Path:
        return self.directory.path

    def release(self) -> None:
        """Give up the directory's lock (the run is finished with it); another writer may open it now."""
        if self.lock is not None:
            self.lock.close()
            self.lock = None


def create(settings: RunSettings, out: Path | None, runs_root: Path = Path("runs")) -> OpenRun:
    """A new run: everything that can fail on bad input is built first, then the directory and manifest."""
    parts = build_parts(settings)
    try:
        check_run_flags(settings, parts.plan)
        check_plan_size(settings, parts.plan, None if settings.stream else len(parts.problems))
        directory = RunDir.create(out or default_run_path(runs_root, settings.method, settings.bench, settings.model))
        lock = hold_lock(directory)
    except BaseException:
        parts.close()
        raise
    manifest = RunManifest(
        kind="stream" if settings.stream else "batch",
        run=_recordable(settings),
        effective=parts.effective(),
        method=dict(parts.plan.method),
        benchmark=parts.benchmark.describe(),
        model=parts.model.describe() if parts.model is not None else None,
        versions=versions(),
    )
    directory.write_manifest(manifest)
    notes = list(parts.benchmark.notes) + [f"warning: {w}" for w in budget_warnings(settings, parts.model)]
    tuned = tuned_set_note(manifest)
    if tuned:
        notes.append(f"warning: not held out: {tuned}; its figures measure the tuning set (e.g. --bench-opt seed=1)")
    plan = manifest.effective
    if plan is not None:
        notes += [f"warning: {w}" for w in plan_warnings(plan.sampling, plan.n, plan.planned_calls_per_problem)]
    return OpenRun(directory, manifest, parts, notes=notes, lock=lock, settings_used=settings)


def resume(path: Path, changes: ResumeChanges | None = None) -> OpenRun:
    """Continue a killed or stopped run; `changes` (budgets, servers, timeout, concurrency) are recorded."""
    directory = RunDir.open_existing(path)
    lock = hold_lock(directory)
    notes = []
    if directory.upgrade():
        notes.append(f"upgraded {path} to the current record schema (the files as they were: {path}/schema1/)")
    manifest = directory.read_manifest()
    if manifest.kind == "served":  # its problems are requests: there is no benchmark to run again
        lock.close()
        raise UserError(f"{path} is a served run; serve it again to continue: {continue_command(path, manifest)}")
    given = (changes or ResumeChanges()).given()
    if any(REDACTED in url for url in manifest.run.api_base) and "api_base" not in given:
        raise UserError(
            f"{path}: its --api-base carried a credential, which was not stored; give the URL again: "
            f"testtime run --resume {path} --api-base URL"
        )
    settings = manifest.run.model_copy(update=given)  # what runs: a new URL whole, its credential included
    recorded = _recordable(settings)
    changed = {k: getattr(recorded, k) for k in given if getattr(recorded, k) != getattr(manifest.run, k)}
    if changed:
        resumed = [*manifest.resumed, Resumed(time=now(), changed=changed)]
        manifest = manifest.model_copy(update={"run": recorded, "resumed": resumed})
    parts = build_parts(settings)
    if data_changed(manifest.benchmark, parts.benchmark):
        parts.close()
        raise UserError(
            f"{manifest.run.bench} changed since this run started (its sha256 differs): the finished problems "
            "were answered from other data; start a new run instead"
        )
    if manifest.effective is None:  # written before effective settings were recorded: record them now
        manifest = manifest.model_copy(update={"effective": parts.effective()})
    directory.write_manifest(manifest)
    notes += [f"warning: {w}" for w in budget_warnings(settings, parts.model)]
    return OpenRun(directory, manifest, parts, notes=notes, lock=lock, settings_used=settings)


def replay(path: Path, into: Path | None = None) -> OpenRun:
    """Re-score a run from its cache, making no model call, into a fresh folder inside it (or `into`: merge's
    scratch folder, which re-derives a shard's selections without writing to the shard)."""
    source = RunDir.open_existing(path)
    manifest = source.read_manifest()
    parts = build_parts(manifest.run, replay=True)
    directory = RunDir.create(into or path / f"replay-{time.strftime('%Y%m%d-%H%M%S')}")
    lock = hold_lock(directory)
    replayed = manifest.model_copy(
        update={"effective": parts.effective(), "model": None, "created": now(), "resumed": []}
    )
    directory.write_manifest(replayed)
    return OpenRun(directory, replayed, parts, replay_of=source, lock=lock)


@dataclass
class ServedDir:
    """A served run's directory, opened for writing: requests arrive later, one problem each (`testtime.serve`)."""

    directory: RunDir
    manifest: RunManifest
    lock: IO[str] | None

    def release(self) -> None:
        if self.lock is not None:
            self.lock.close()
            self.lock = None


def open_served(
    settings: RunSettings,
    out: Path | None,
    served: dict[str, Any],
    effective: Effective,
    method: dict[str, Any],
    model: dict[str, Any],
    runs_root: Path = Path("runs"),
) -> ServedDir:
    """A served run (`kind: served`): its problems are requests, so the manifest's `benchmark` says how requests
    are read and `effective` holds the server's own method's plan (a request that asks for another method or
    other sampling records its own in `requests.jsonl`). Serving again on the `--out` of a served run continues
    it: the same cache (a re-sent request with its seed is not paid again), ledger, results and requests, its
    budgets counting both lifetimes; what changed (the method, n, budgets...) is listed in `resumed`."""
    path = out or default_run_path(runs_root, f"serve-{settings.method}", "requests", settings.model)
    recorded = _recordable(settings)
    if (path / "config.json").is_file():
        directory = RunDir.open_existing(path)
        lock = hold_lock(directory)
        try:
            manifest = _continued_served(directory, recorded, served, effective, method, model)
        except BaseException:
            lock.close()  # refused: the folder is left as it was, for its own writer
            raise
    else:
        directory = RunDir.create(path)
        lock = hold_lock(directory)
        manifest = RunManifest(
            kind="served",
            run=recorded,
            effective=effective,
            method=method,
            benchmark=served,
            model=model,
            versions=versions(),
        )
    directory.write_manifest(manifest)
    return ServedDir(directory, manifest, lock)


def _continued_served(
    directory: RunDir,
    recorded: RunSettings,
    served: dict[str, Any],
    effective: Effective,
    method: dict[str, Any],
    model: dict[str, Any],
) -> RunManifest:
    """The manifest of a served run served again, after checking it is one, with this model; nothing in the
    folder changes before both checks pass."""
    path = directory.path
    before = directory.read_manifest()  # an older schema is read through the migration, in memory
    if before.kind != "served":
        raise UserError(
            f"{path} holds a {before.kind} run, not a served one; continue it with "
            f"testtime run --resume {path}, or serve into another --out"
        )
    if before.run.model != recorded.model:
        raise UserError(
            f"{path} was served with --model {before.run.model}; serve it again with that model, or choose "
            "another --out (one run answers with one model)"
        )
    directory.upgrade()
    directory.repair_appended()  # a kill -9 may have torn the last line of a file this lifetime appends to
    old, new = before.run.model_dump(), recorded.model_dump()
    changed = {k: v for k, v in new.items() if v != old.get(k)}
    if served != before.benchmark:
        changed["served"] = served
    resumed = [*before.resumed, Resumed(time=now(), changed=changed)]
    update = {"run": recorded, "effective": effective, "method": method, "benchmark": served, "resumed": resumed}
    return before.model_copy(update={**update, "model": model, "versions": versions()})


# What a reused sub-run may differ in from the settings that ask for it: what --resume may change, and what never
# changes an answer (where the data lies, whose sandbox runs the same harness, the ceiling, n per request)
REUSE_MAY_DIFFER = frozenset(ResumeChanges.model_fields) | {"data_dir", "sandbox", "max_planned_calls", "n_per_request"}


def create_or_resume(settings: RunSettings, folder: Path) -> OpenRun:
    """A sub-run of a larger job (a grid, a comparison, a sweep's fixed run): created the first time, resumed
    (or reused, once finished) after with the budgets `settings` carries now; one made with other settings
    (another --n, seed, model, sampling or problems) is refused in one line naming the difference, never
    reported as this job's."""
    if (folder / "config.json").is_file():
        check_reusable(folder, settings)
        budgets = ResumeChanges(max_cost=settings.max_cost, max_tokens_total=settings.max_tokens_total)
        return resume(folder, budgets)
    return create(settings, folder)


def finished_run(folder: Path, settings: RunSettings) -> RunSummary | None:
    """The summary of a finished run in `folder` made with `settings` (None: none there, or not finished); a run
    made with other settings is refused in one line (`check_reusable`)."""
    if not (folder / "config.json").is_file():
        return None
    check_reusable(folder, settings)
    summary = RunDir(folder).read_summary()
    return summary if summary is not None and summary.complete else None


def check_reusable(folder: Path, settings: RunSettings) -> None:
    """Refuse (one line) a run in `folder` that was not made with `settings` (but what may differ on reuse)."""
    recorded = RunDir.open_existing(folder).read_manifest().run
    asked = _recordable(settings)
    differs = [
        name
        for name in RunSettings.model_fields
        if name not in REUSE_MAY_DIFFER and getattr(recorded, name) != getattr(asked, name)
    ]
    if differs:
        name, more = differs[0], f" (and {len(differs) - 1} more)" if len(differs) > 1 else ""
        raise UserError(
            f"{folder} holds a run made with {name} {getattr(recorded, name)!r}, where this asks for "
            f"{getattr(asked, name)!r}{more}: it is another run's; give another --out, or remove {folder}"
        )


def continue_command(path: Path, manifest: RunManifest) -> str:
    """The command that continues an unfinished run: a served one is served again on its folder (`--resume`
    is `run`'s, and a served run has no benchmark to run), any other is resumed."""
    if manifest.kind == "served":
        return f"testtime serve --out {path} --model {manifest.run.model} --method {manifest.run.method}"
    return f"testtime run --resume {path}"


def _recordable(settings: RunSettings) -> RunSettings:
    """The settings as the manifest keeps them: a credential written into a server URL redacted."""
    return settings.model_copy(update={"api_base": [redact_url(u) for u in settings.api_base]})


def hold_lock(directory: RunDir) -> IO[str]:
    """Hold the directory's lock for this process's life (closing the file, or dying, releases it)."""
    handle = (directory.path / LOCK).open("a+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise UserError(
            f"{directory.path} is being written by process {holder}; wait for it to finish or stop it first"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle
