"""Run an opened run (`lifecycle`): solve every problem not yet done, grade as results arrive, summarise.

The method sees problems and a context only. Grading happens here, as each problem's result streams out,
with the sealed references the method never receives. Results, ledger and cache live in the run directory,
so `--resume` continues a killed run and `--replay` re-scores from the cache with no model call.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Callable

from testtime.core.checkpoint import RoundCheckpoints
from testtime.core.errors import BudgetExhausted, Interrupted, RunStopped
from testtime.core.results import ResultRecord, read_steps
from testtime.core.rollout import RolloutEngine
from testtime.evaluation.caveats import plan_warnings
from testtime.evaluation.scoring import score
from testtime.evaluation.summary import RunSummary
from testtime.methods import MethodContext, PerProblem
from testtime.run.build import label_oracle
from testtime.run.engine import open_engine
from testtime.run.lifecycle import OpenRun
from testtime.run.observer import ProgressPlan, QuietObserver, RunObserver
from testtime.run.outcome import write_outcome
from testtime.run.stream import solve_stream, update_steps

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
GRACE_S = 10.0  # how long calls in flight may take to land after a stop signal


def _failed_round(record: ResultRecord) -> int | None:
    """The first round (TRT, RSA) or 0 (single-shot methods) in which a sample of this result failed."""
    failed = [r.round for r in record.rounds if any(c.error for c in r.candidates)]
    if failed:
        return min(failed)
    return 0 if any(c.error for c in record.candidates) else None


def execute(run: OpenRun, observer: RunObserver | None = None, retry_errors: bool = True) -> RunSummary:
    """Solve every problem not yet in results.jsonl, grade as results arrive, write summary.json. With
    `retry_errors` (a resume's default), problems with failed samples are solved again: every sample that
    succeeded comes back from the cache, every failed one is asked for again (its attempts stay in the
    ledger), multi-round methods restart at the first round that had a failure."""
    observer = observer or QuietObserver()
    settings, parts, directory = run.settings, run.parts, run.directory
    method, problems = parts.method, parts.problems
    done = directory.read_results()
    checkpoints = RoundCheckpoints(directory.rounds_path)
    retried = 0
    streaming = settings.stream
    # A stream's answers belong to the state they met: a failed sample is never asked again by a later state.
    if retry_errors and not streaming and run.replay_of is None and isinstance(method, PerProblem):
        for record in list(done):
            first = _failed_round(record)
            if first is not None:
                checkpoints.forget(record.problem_id, first)
                done.remove(record)
                retried += 1
    directory.rewrite_results(done)
    if not streaming:
        directory.write_problems(problems)  # a stream records each problem as it arrives
    done_ids = {r.problem_id for r in done}
    todo = [p for p in problems if p.id not in done_ids]
    engine = open_engine(settings, parts.model, directory, cache_of=run.replay_of)
    ledger = engine.ledger
    effective = run.manifest.effective
    ctx = MethodContext(
        checkpoints=checkpoints,
        engine=engine,
        params=settings.sampling(method.default_sampling),
        prompt=parts.benchmark.prompt,
        n=settings.n,
        seed=settings.seed,
        sandbox=parts.sandbox,
        workdir=directory.path,
        sampling=dict(effective.sampling) if effective else {},
        oracle=label_oracle(parts),
    )
    started = time.perf_counter()
    stopped = None
    per_problem = method.planned_calls(parts.benchmark.domain, settings.n)
    rounds = method.planned_rounds()
    stdin = streaming and not problems
    observer.start(
        ProgressPlan(
            problems=None if stdin else len(problems),
            done=len(done),
            totals=ledger.totals,
            planned_calls=per_problem * len(todo) if per_problem and not stdin else None,
            rounds=rounds * len(problems) if rounds and not stdin else None,
        )
    )
    interrupted: Interrupted | None = None
    budget: BudgetExhausted | None = None
    try:
        asyncio.run(_solve(run, todo, ctx, observer, checkpoints, streaming))
    except RunStopped as exc:
        stopped = str(exc)  # finished problems are saved; a resume (with a larger budget) continues
        interrupted = exc if isinstance(exc, Interrupted) else None
        budget = exc if isinstance(exc, BudgetExhausted) else None
    except BaseException:
        run.release()
        raise
    finally:
        observer.stop()
        engine.close()
        parts.close()
    if budget is not None:  # the spend once every call in flight has landed, not when the stop fired
        stopped = budget.final(ledger.totals.cost_usd if budget.kind == "cost" else ledger.totals.tokens)
    records = directory.read_results()
    # A stream's problems are what arrived, in arrival order; one from a benchmark is complete once all arrived.
    arrived = list(directory.read_problems().values()) if streaming else problems
    extra = {}
    if parts.benchmark.domain == "code":
        extra["grader"] = parts.benchmark.describe().get("grader", "lenient")
    steps = update_steps(directory.path) if streaming else read_steps(directory.path / "ttrl" / "steps.jsonl")
    summary = write_outcome(
        directory,
        settings,
        records,
        ledger.totals,
        order=[p.id for p in arrived],
        steps=steps,
        stream_order=("stdin" if stdin else "shuffled" if settings.shuffle else "dataset") if streaming else None,
        n=effective.n if effective else settings.n,
        wall_s=time.perf_counter() - started,
        replay=run.replay_of is not None,
        complete=len(records) == len(arrived if stdin else problems),
        stopped=stopped,
        retried_problems=retried,
        uses_labels=method.uses_labels(),
        warnings=plan_warnings(effective.sampling, effective.n) if effective else [],
        **extra,
    )
    run.release()
    if interrupted is not None:
        raise interrupted  # the summary is written; the command says how to resume and exits 128 + signal
    return summary


def _stop_on_signals(engine: RolloutEngine) -> Callable[[], None]:
    """Ctrl-C, SIGTERM and SIGHUP stop the run gracefully: no new call starts, calls in flight have
    `GRACE_S` to land (then they are cancelled); a second signal cancels at once. Returns the undo."""
    loop, main = asyncio.get_running_loop(), asyncio.current_task()
    if threading.current_thread() is not threading.main_thread() or main is None:
        return lambda: None  # signal handlers belong to the main thread (a server runs its own)

    def on_signal(signum: int) -> None:
        if engine.stop is not None and isinstance(engine.stop, Interrupted):
            main.cancel()  # the second one: no grace
            return
        engine.request_stop(Interrupted(f"interrupted by {signal.Signals(signum).name}", signum))
        loop.call_later(GRACE_S, main.cancel)

    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, on_signal, signum)
    return lambda: [loop.remove_signal_handler(s) for s in STOP_SIGNALS] and None


async def _solve(
    run: OpenRun,
    todo: list,
    ctx: MethodContext,
    observer: RunObserver,
    checkpoints: RoundCheckpoints,
    streaming: bool = False,
) -> None:
    parts = run.parts

    def on_result(record: ResultRecord) -> None:
        observer.problem_done(record, checkpoints.finished_rounds())

    async def refresh() -> None:
        while True:
            observer.tick(checkpoints.finished_rounds())
            await asyncio.sleep(0.5)

    refresher = asyncio.create_task(refresh())
    undo = _stop_on_signals(ctx.engine)
    try:
        if streaming:
            await solve_stream(run, ctx, on_result, observer.note)
        else:
            async for result in parts.method.stream(todo, ctx):
                # Grading may run programs in the sandbox: off the event loop, so sampling carries on meanwhile.
                grading = await asyncio.to_thread(score, parts.benchmark, result, parts.references[result.problem_id])
                record = ResultRecord.of(result, grading)
                run.directory.append_result(record)
                on_result(record)
    except asyncio.CancelledError:
        stop = ctx.engine.stop
        if isinstance(stop, Interrupted):
            raise stop from None  # the grace period ran out, or a second signal came
        raise
    finally:
        undo()
        refresher.cancel()
        if parts.model is not None:
            await parts.model.aclose()
        # Whatever is left (calls of an abandoned problem) ends here, its errors collected, so an error that
        # stopped the run is reported once, by the caller, and not again by asyncio's shutdown.
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
