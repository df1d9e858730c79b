"""One `testtime run`: build benchmark, model and method from a RunConfig; solve; grade; summarise.

The method sees problems and a context only. Grading happens here, as each problem's result streams out,
with the sealed references the method never receives. Results, ledger and cache live in the run directory,
so `--resume` continues a killed run and `--replay` re-scores from the cache with no model call.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testtime.benchmarks import BENCHMARKS, Benchmark, SealedReferences, load_benchmarks
from testtime.benchmarks.scoring import score, summarize
from testtime.benchmarks.ttrl_compute import ttrl_compute
from testtime.core.cache import CompletionCache
from testtime.core.checkpoint import RoundCheckpoints
from testtime.core.errors import BudgetExhausted, UserError
from testtime.core.ledger import Ledger, read_entries
from testtime.core.model import LanguageModel
from testtime.core.records import Problem
from testtime.core.results import ResultRecord
from testtime.core.rollout import RetryPolicy, RolloutEngine
from testtime.core.rundir import RunDir, default_run_path
from testtime.core.trace import Trace
from testtime.experiments.config import RunConfig, versions
from testtime.experiments.display import RunProgress
from testtime.methods import METHODS, Method, MethodContext, PerProblem, load_methods
from testtime.models import resolve_model
from testtime.sandbox import Sandbox
from testtime.sandbox.choose import CHOICES, open_sandbox


def _build(kind: str, factory: Any, name: str, options: dict[str, Any]) -> Any:
    try:
        return factory(**options)
    except TypeError as exc:
        if "unexpected keyword argument" not in str(exc):
            raise
        raise UserError(f"{kind} '{name}' does not take option {str(exc).split('argument')[-1].strip()}") from None


def build_benchmark(config: RunConfig) -> Benchmark:
    load_benchmarks()
    factory = BENCHMARKS.get(config.bench)
    return _build("benchmark", factory, config.bench, {"data_dir": config.data_dir, **config.bench_options})


def build_method(config: RunConfig) -> Method:
    load_methods()
    return _build("method", METHODS.get(config.method), config.method, dict(config.method_options))


def load_problems(benchmark: Benchmark, limit: int | None) -> tuple[list[Problem], SealedReferences]:
    problems, references = benchmark.load()
    return (problems[:limit] if limit else problems), references


@dataclass
class RunParts:
    benchmark: Benchmark
    method: Method
    model: LanguageModel | None  # None in replay: only the cache answers
    problems: list[Problem]
    references: SealedReferences
    sandbox: Sandbox | None = None  # code benchmarks: grading and execution-based selection run here


def build_parts(config: RunConfig, replay: bool = False) -> RunParts:
    """Everything a run needs, built before anything is written, so bad input leaves no trace."""
    benchmark, method = build_benchmark(config), build_method(config)
    method.check_model(config.model)
    method.prepare(benchmark.domain, benchmark.name)  # its selector: a bad --selector or --selector-opt fails here
    problems, references = load_problems(benchmark, config.limit)
    model = None
    if not replay:
        model = resolve_model(
            config.model,
            api_base=config.api_base,
            api_key_env=config.api_key_env,
            max_batch=config.concurrency,
            request_timeout_s=config.request_timeout,
        )
    sandbox = None
    if benchmark.needs_sandbox:
        if config.sandbox not in CHOICES:
            raise UserError(f"--sandbox must be one of {', '.join(CHOICES)}, not '{config.sandbox}'")
        sandbox = open_sandbox(config.sandbox)
        benchmark.sandbox = sandbox
    return RunParts(benchmark, method, model, problems, references, sandbox)


def check_run_flags(config: RunConfig, method: Method) -> None:
    """A generic flag the method would ignore is a mistake, not a setting: say what to use instead."""
    for flag in ("n", "temperature", "top_p", "max_tokens"):
        if getattr(config, flag) is not None and flag not in method.run_flags:
            hint = method.flag_hints.get(flag, "")
            spelled = "--" + flag.replace("_", "-")
            raise UserError(f"--method {method.name} does not use {spelled}" + (f": {hint}" if hint else ""))


def start_run(config: RunConfig, out: Path | None, runs_root: Path = Path("runs")) -> tuple[RunDir, RunParts]:
    """Build everything that can fail on bad input first, then create the run directory and config.json."""
    parts = build_parts(config)
    check_run_flags(config, parts.method)
    benchmark, method = parts.benchmark, parts.method
    run = RunDir.create(out or default_run_path(runs_root, config.method, config.bench, config.model))
    run.write_config(
        {
            "run": config.model_dump(mode="json"),
            "benchmark": benchmark.describe(),
            "method": method.describe(),
            "model": parts.model.describe() if parts.model is not None else None,
            "versions": versions(),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
    )
    return run, parts


def _failed_round(record: ResultRecord) -> int | None:
    """The first round (TRT, RSA) or 0 (single-shot methods) in which a sample of this result failed."""
    failed = [r.round for r in record.rounds if any(c.error for c in r.candidates)]
    if failed:
        return min(failed)
    return 0 if any(c.error for c in record.candidates) else None


def execute(
    run: RunDir,
    *,
    parts: RunParts | None = None,
    replay_of: RunDir | None = None,
    progress: bool = True,
    retry_errors: bool = True,
) -> dict[str, Any]:
    """Solve every problem not yet in results.jsonl, grade as results arrive, write summary.json. With
    `retry_errors` (a resume's default), problems with failed samples are solved again: every sample that
    succeeded comes back from the cache, every failed one is asked for again (its attempts stay in the
    ledger), multi-round methods restart at the first round that had a failure."""
    config = RunConfig.from_saved((replay_of or run).read_config(), str((replay_of or run).config_path))
    parts = parts or build_parts(config, replay=replay_of is not None)
    benchmark, method, model = parts.benchmark, parts.method, parts.model
    problems, references = parts.problems, parts.references
    done = run.read_results()
    checkpoints = RoundCheckpoints(run.path / "rounds.jsonl")
    retried = 0
    if retry_errors and replay_of is None and isinstance(method, PerProblem):  # TTRL trains on the whole set
        for record in list(done):
            first = _failed_round(record)
            if first is not None:
                checkpoints.forget(record.problem_id, first)
                done.remove(record)
                retried += 1
    run.rewrite_results(done)
    done_ids = {r.problem_id for r in done}
    todo = [p for p in problems if p.id not in done_ids]
    cache = CompletionCache((replay_of or run).cache_path)
    ledger = Ledger(run.ledger_path)
    engine = RolloutEngine(
        model,
        model_name=config.model,
        cache=cache,
        ledger=ledger,
        concurrency=config.concurrency,
        retry=RetryPolicy(call_timeout_s=config.request_timeout),
        max_cost_usd=config.max_cost,
        max_tokens_total=config.max_tokens_total,
        trace=Trace(run.path),
    )
    params = config.sampling()
    ctx = MethodContext(
        checkpoints=checkpoints,
        engine=engine,
        params=params,
        prompt=benchmark.prompt,
        n=config.n,
        seed=config.seed,
        sandbox=parts.sandbox,
        workdir=run.path,
    )
    started = time.perf_counter()
    stopped = None
    try:
        per_problem = method.planned_calls(benchmark.domain, config.n)
        rounds = method.planned_rounds()
        with RunProgress(
            len(problems),
            len(done),
            ledger.totals,
            enabled=progress,
            planned_calls=per_problem * len(todo) if per_problem else None,
            rounds=(rounds * len(problems), checkpoints.finished_rounds) if rounds else None,
        ) as bar:
            asyncio.run(_solve(method, todo, ctx, benchmark, references, run, bar, model))
    except BudgetExhausted as exc:
        stopped = str(exc)  # finished problems are saved; a resume with a larger budget continues
    finally:
        ledger.close()
        engine.trace.close()
        cache.close()
        benchmark.close()
    records = run.read_results()
    summary = summarize(records, ledger.totals.as_dict(), seed=config.seed)
    summary.update(
        method=config.method,
        bench=config.bench,
        model=config.model,
        n=config.n,
        wall_s=time.perf_counter() - started,
        replay=replay_of is not None,
        complete=len(records) == len(problems),
        stopped=stopped,
        retried_problems=retried,
    )
    if benchmark.domain == "code":
        summary["grader"] = benchmark.describe().get("grader", "lenient")
    if summary.get("ttrl"):  # on the compute frontier: the base model's majority at the same tokens
        compute = ttrl_compute(read_entries(run.ledger_path), records, config.seed)
        summary["ttrl"]["compute"] = compute
        summary["same_budget_majority_n"] = compute.get("same_tokens_k")
    run.write_summary(summary)
    return summary


async def _solve(
    method: Method,
    todo: list[Problem],
    ctx: MethodContext,
    benchmark: Benchmark,
    references: SealedReferences,
    run: RunDir,
    bar: RunProgress,
    model: LanguageModel | None,
) -> None:
    refresher = asyncio.create_task(bar.refresh_forever())
    try:
        async for result in method.stream(todo, ctx):
            # Grading may run programs in the sandbox: off the event loop, so sampling carries on meanwhile.
            grading = await asyncio.to_thread(score, benchmark, result, references[result.problem_id])
            run.append_result(ResultRecord.of(result, grading))
            bar.advance()
    finally:
        refresher.cancel()
        if model is not None:
            await model.aclose()
