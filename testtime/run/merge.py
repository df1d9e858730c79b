"""`testtime merge`: shard runs (`--shard I/N`) back into one run directory, as if it had run unsharded.

Refused unless the shards are one run cut in N: the same settings but where each shard may differ (its shard,
its servers, key variable, budgets, timeout, concurrency), the same method, the same benchmark data (its
sha256), every shard 1..N exactly once, each finished. The merged directory holds the results and problems
in the unsharded order, the ledger, trace, round checkpoints and cache of every shard, predictions, and a
summary recomputed from those (never averaged from the shards' summaries: intervals and maj@k are not
averages). Its wall time is the caller's (a Ray run's driver), else null: shards that ran at different times
were never one run's wall clock.

Nothing a shard says about itself is trusted: the benchmark is loaded again (its data must still have the
shards' sha256), each shard must hold exactly the slice its manifest names (the same problems, in order), no
problem is answered twice, every prediction and token count is derived again from the records it was made
from (`merge_checks.py`: the candidates' texts against the cache, the ledger against the cache, each selection
by replaying the shard from its own cache), and every result is graded again against the sealed references, so
an edited `correct` field, a forged prediction or selection, an inflated ledger or a relabelled copy of another
shard cannot change the merged figures. A shard forged whole, consistent with its own cache, can (said in
docs/scaling.md).
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

from testtime.core.cache import CompletionCache
from testtime.core.errors import UserError
from testtime.core.jsonl import is_json, read_records
from testtime.core.ledger import Ledger
from testtime.core.records import Problem
from testtime.core.results import ProblemResult, ResultRecord
from testtime.evaluation.scoring import score
from testtime.evaluation.summary import RunSummary
from testtime.run.build import build_benchmark, check_sandbox_choice, data_changed, load_problems
from testtime.run.directory import RunDir
from testtime.run.manifest import RunManifest, now
from testtime.run.merge_checks import check_selections, check_shard
from testtime.run.outcome import write_outcome
from testtime.run.settings import ResumeChanges
from testtime.run.shard import interleave, parse_shard, shard_of
from testtime.sandbox.choose import open_sandbox

# Settings a shard may set for itself: where and how patiently it was served, what it might spend.
PER_SHARD = {"shard", *ResumeChanges.model_fields}
CONCATENATED = ("ledger.jsonl", "trace.jsonl", "rounds.jsonl")


def read_shards(paths: list[Path]) -> list[tuple[RunDir, RunManifest]]:
    """The shard runs in shard order, checked to be one run cut in N, every shard present and finished."""
    if not paths:
        raise UserError("merge needs the shard run directories: testtime merge RUN... --out DIR")
    shards = []
    for path in paths:
        directory = RunDir.open_existing(path)
        manifest = directory.read_manifest()
        if manifest.run.shard is None:
            raise UserError(f"{path} is not a shard (it ran without --shard)")
        shards.append((parse_shard(manifest.run.shard), directory, manifest))
    count = shards[0][0][1]
    seen: dict[int, Path] = {}
    for (index, n), directory, _ in shards:
        if n != count:
            raise UserError(f"{directory.path} is shard {index}/{n}, but {shards[0][1].path} is one of {count}")
        if index in seen:
            raise UserError(f"shard {index}/{count} is given twice: {seen[index]} and {directory.path}")
        seen[index] = directory.path
    missing = sorted(set(range(1, count + 1)) - set(seen))
    if missing:
        raise UserError(f"shards {', '.join(f'{i}/{count}' for i in missing)} are missing: merge needs all {count}")
    shards.sort(key=lambda s: s[0][0])
    first = shards[0][2]
    for _, directory, manifest in shards:
        _check_same(first, manifest, directory.path)
        _check_finished(directory)
    return [(directory, manifest) for _, directory, manifest in shards]


def _check_same(first: RunManifest, other: RunManifest, path: Path) -> None:
    if other.kind != "batch":
        raise UserError(f"{path} is a {other.kind} run; only batch runs are sharded")
    mine, theirs = _comparable(first), _comparable(other)
    for key in mine.keys() | theirs.keys():
        if mine.get(key) != theirs.get(key):
            raise UserError(
                f"{path} differs from the first shard in {key} ({theirs.get(key)!r} vs {mine.get(key)!r}): "
                "these are not shards of one run"
            )


def _comparable(manifest: RunManifest) -> dict[str, Any]:
    run = {f"run.{k}": v for k, v in manifest.run.model_dump().items() if k not in PER_SHARD}
    return run | {"method": manifest.method, "benchmark": manifest.benchmark}


def _check_finished(directory: RunDir) -> None:
    summary = directory.read_summary()
    if summary is None or not summary.complete:
        done = len(directory.read_results())
        raise UserError(
            f"{directory.path} is not finished ({done} problems done): continue it first with "
            f"testtime run --resume {directory.path}"
        )


def merge_runs(paths: list[Path], out: Path, wall_s: float | None = None) -> tuple[RunDir, RunSummary]:
    """Merge finished shard runs into a new run directory `out`; returns it with its recomputed summary."""
    shards = read_shards(paths)
    merged = merged_records(shards)  # checked and graded before anything is written
    for directory, _ in shards:  # a Ray run's own shards are not replayed: its driver made them
        check_selections(directory.path)
    target = RunDir.create(out)
    write_merged(target, shards, merged, [s.path for s, _ in shards], wall_s)
    summary = target.read_summary()
    assert summary is not None
    return target, summary


def merged_records(shards: list[tuple[RunDir, RunManifest]]) -> tuple[list[Problem], list[ResultRecord]]:
    """The problems in the unsharded order and their results, graded again (`regraded`)."""
    problem_lists = [list(directory.read_problems().values()) for directory, _ in shards]
    result_lists = [directory.read_results() for directory, _ in shards]
    problems: list[Problem] = interleave(problem_lists)
    return problems, regraded(shards, problem_lists, result_lists, problems)


def write_merged(
    target: RunDir,
    shards: list[tuple[RunDir, RunManifest]],
    merged: tuple[list[Problem], list[ResultRecord]],
    sources: list[Path],
    wall_s: float | None,
    ray_shards: int | None = None,
) -> None:
    """Everything of the merged run into `target` (also how a Ray run of `ray_shards` assembles its shards)."""
    problems, records = merged
    first = shards[0][1]
    effective = first.effective.model_copy(update={"problems": len(problems)}) if first.effective else None
    manifest = first.model_copy(
        update={
            "run": first.run.model_copy(update={"shard": None, "shards": ray_shards}),
            "effective": effective,
            "created": now(),
            "resumed": [],
            "merged_from": [str(p.resolve()) for p in sources],
        }
    )
    target.write_manifest(manifest)
    target.write_problems(problems)
    target.rewrite_results(records)
    for name in CONCATENATED:
        parts = [directory.path / name for directory, _ in shards]
        _concatenate([p for p in parts if p.exists()], target.path / name)
    _merge_blobs([directory.path / "blobs.jsonl" for directory, _ in shards], target.path / "blobs.jsonl")
    _merge_caches([directory.cache_path for directory, _ in shards], target.cache_path)
    ledger = Ledger(target.ledger_path)
    ledger.close()
    settings = manifest.run
    write_outcome(
        target,
        settings,
        records,
        ledger.totals,
        n=effective.n if effective else settings.n,
        wall_s=wall_s,
        complete=len(records) == len(problems),
        **_grader(manifest),
    )


def regraded(
    shards: list[tuple[RunDir, RunManifest]],
    problem_lists: list[list[Problem]],
    result_lists: list[list[ResultRecord]],
    order: list[Problem],
) -> list[ResultRecord]:
    """Every shard's results graded again from the benchmark's sealed references, in `order`, after checking
    that each shard holds the slice of the benchmark its manifest names (see the module's docstring)."""
    first = shards[0][1]
    settings = first.run.model_copy(update={"shard": None})
    benchmark = build_benchmark(settings)
    try:
        problems, references = load_problems(benchmark, settings.limit)
        if data_changed(first.benchmark, benchmark):
            raise UserError(f"{settings.bench} changed since the shards ran (its sha256 differs): cannot grade them")
        count = len(shards)
        by_id: dict[str, ResultRecord] = {}
        for index, ((directory, manifest), held, results) in enumerate(
            zip(shards, problem_lists, result_lists, strict=True), 1
        ):
            expected_problems = shard_of(problems, f"{index}/{count}")
            expected = [p.id for p in expected_problems]
            if [p.id for p in held] != expected:
                raise UserError(
                    f"{directory.path} does not hold shard {index}/{count}'s problems ({len(held)} held, "
                    f"{len(expected)} expected, in the benchmark's order): not a shard of this run"
                )
            answered = Counter(r.problem_id for r in results)
            twice = sorted(pid for pid, times in answered.items() if times > 1)
            if twice:
                raise UserError(f"{directory.path}: problem {twice[0]} is answered twice")
            stray = set(answered) - set(expected)
            if stray:
                raise UserError(f"{directory.path} has results for problems outside its shard: {sorted(stray)[:3]}")
            caps = {kind: params.max_tokens for kind, params in (manifest.effective.sampling.items()
                                                                 if manifest.effective else [])}  # fmt: skip
            check_shard(directory.path, held, expected_problems, results, caps)
            by_id.update((r.problem_id, r) for r in results)
        if benchmark.needs_sandbox:  # code is graded by running it on the hidden tests, as the shards did
            check_sandbox_choice(settings)
            benchmark.sandbox = open_sandbox(settings.sandbox)
        fields = set(ProblemResult.model_fields)
        return [
            ResultRecord.of(
                result := ProblemResult.model_validate(record.model_dump(include=fields)),
                score(benchmark, result, references[record.problem_id]),
            )
            for record in (by_id[p.id] for p in order if p.id in by_id)
        ]
    finally:
        benchmark.close()


def _grader(manifest: RunManifest) -> dict[str, Any]:
    grader = manifest.benchmark.get("grader")
    return {"grader": grader} if grader else {}


def _concatenate(parts: list[Path], target: Path) -> None:
    """Each shard's lines, shard after shard; a line torn by a kill is left out (it was re-made in the shard)."""
    with target.open("w", encoding="utf-8") as out:
        for part in parts:
            for line in read_records(part):
                if is_json(line):
                    out.write(line + "\n")


def _merge_blobs(parts: list[Path], target: Path) -> None:
    seen: set[str] = set()
    with target.open("w", encoding="utf-8") as out:
        for part in (p for p in parts if p.exists()):
            for line in read_records(part):
                if is_json(line) and (key := json.loads(line)["id"]) not in seen:
                    seen.add(key)
                    out.write(line + "\n")


def _merge_caches(parts: list[Path], target: Path) -> None:
    """One cache with every shard's completions (keys are content hashes, so shards never disagree on one)."""
    CompletionCache(target).close()  # the cache's own schema
    db = sqlite3.connect(target)
    try:
        for part in (p for p in parts if p.exists()):
            db.execute("ATTACH DATABASE ? AS shard", (str(part),))
            db.execute("INSERT OR IGNORE INTO completions SELECT key, value FROM shard.completions")
            db.commit()
            db.execute("DETACH DATABASE shard")
    finally:
        db.close()
