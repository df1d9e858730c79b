"""Run an opened run (`lifecycle`) through the loop (`loop.py`): its source, its method's learner, its outcome.

The method sees problems and a context only; the session grades each result with the sealed references the
method never receives. Results, ledger and cache live in the run directory, so `--resume` continues a killed
run and `--replay` re-scores from the cache with no model call. Stop signals, budgets and the summary are
handled here once for batch runs, streams and shards (a Ray task runs its shard through this function).
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from testtime.core.checkpoint import RoundCheckpoints
from testtime.core.errors import BudgetExhausted, Interrupted, RunStopped
from testtime.core.model import LanguageModel
from testtime.core.results import Grading, ProblemResult, ResultRecord
from testtime.core.rollout import RolloutEngine
from testtime.evaluation.caveats import plan_warnings
from testtime.evaluation.scoring import score
from testtime.evaluation.summary import ForwardPasses, RunSummary
from testtime.methods import MethodContext, PerProblem
from testtime.methods.learner import Learner
from testtime.run.build import label_oracle, tuned_set_note
from testtime.run.engine import method_calls, method_context, open_engine
from testtime.run.lifecycle import OpenRun
from testtime.run.loop import Arrival, ProblemList, Session, Source, unlabelled_of
from testtime.run.observer import ProgressPlan, QuietObserver, RunObserver
from testtime.run.outcome import write_outcome
from testtime.run.stream import StreamSource

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
GRACE_S = 10.0  # how long calls in flight may take to land after a stop signal


def _failed_round(record: ResultRecord) -> int | None:
    """The first round (TRT, RSA) or 0 (single-shot methods) in which a sample of this result failed."""
    failed = [r.round for r in record.rounds if any(c.error for c in r.candidates)]
    if failed:
        return min(failed)
    return 0 if any(c.error for c in record.candidates) else None


def open_source(run: OpenRun, checkpoints: RoundCheckpoints, retry_errors: bool) -> tuple[Source, int]:
    """What feeds this run's loop, and how many problems a resume solves again: a stream's arrivals, or a
    batch's problems not yet done. With `retry_errors` (a resume's default), a batch's problems with failed
    samples are solved again: every sample that succeeded comes back from the cache, every failed one is asked
    for again (its attempts stay in the ledger), multi-round methods restart at the first round that failed.
    A stream's answers belong to the state they met: a failed sample is never asked again by a later state."""
    directory, problems = run.directory, run.parts.problems
    if run.settings.stream:
        return StreamSource(run), 0
    done = directory.read_results()
    retried = 0
    if retry_errors and run.replay_of is None and isinstance(run.parts.method, PerProblem):
        for record in list(done):
            first = _failed_round(record)
            if first is not None:
                checkpoints.forget(record.problem_id, first)
                done.remove(record)
                retried += 1
    directory.rewrite_results(done)
    directory.write_problems(problems)
    done_ids = {r.problem_id for r in done}
    todo = [p for p in problems if p.id not in done_ids]
    return ProblemList(problems, todo, run.parts.references, directory.path), retried


def execute(run: OpenRun, observer: RunObserver | None = None, retry_errors: bool = True) -> RunSummary:
    """Run an opened batch, stream or shard through the loop until its source is spent (or a budget or a stop
    signal ends it), then write its outcome. Served runs enter the same loop per request (`serve/session.py`)."""
    observer = observer or QuietObserver()
    settings, parts, directory = run.settings, run.parts, run.directory
    method = parts.method
    checkpoints = RoundCheckpoints(directory.rounds_path)
    source, retried = open_source(run, checkpoints, retry_errors)
    engine = open_engine(settings, parts.model, directory, cache_of=run.replay_of)
    effective = run.manifest.effective
    plan = parts.plan
    if effective is not None:  # a resumed run sends what its manifest recorded
        plan = replace(plan, sampling={**plan.sampling, **effective.sampling}, samples=effective.n)
    ctx = method_context(
        engine,
        plan,
        parts.benchmark.prompt,
        settings.seed,
        sandbox=parts.sandbox,
        checkpoints=checkpoints,
        workdir=directory.path,
        oracle=label_oracle(parts),
    )
    done = len(directory.read_results())
    known = source.known()
    per_problem, rounds = plan.calls, plan.rounds
    observer.start(
        ProgressPlan(
            problems=known,
            done=done,
            totals=engine.ledger.totals,
            planned_calls=per_problem * (known - done) if per_problem and known is not None else None,
            rounds=rounds * known if rounds and known is not None else None,
        )
    )

    def grade(arrival: Arrival, result: ProblemResult) -> Grading:
        if arrival.reference is None:
            return unlabelled_of(arrival, result)
        return score(parts.benchmark, result, arrival.reference)

    session = Session(
        directory,
        engine,
        grade,
        on_result=lambda record: observer.problem_done(record, checkpoints.finished_rounds()),
    )
    started = time.perf_counter()
    stopped, interrupted, budget = None, None, None
    try:
        asyncio.run(
            _drive(session, source, method.learner(ctx), ctx, observer, checkpoints, settings.max_planned_calls)
        )
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
        stopped = budget.final(engine.ledger.totals.cost_usd if budget.kind == "cost" else engine.ledger.totals.tokens)
    records = directory.read_results()
    extra = {"grader": parts.benchmark.describe().get("grader", "lenient")} if parts.benchmark.domain == "code" else {}
    summary = write_outcome(
        directory,
        settings,
        records,
        engine.ledger.totals,
        n=effective.n if effective else settings.n,
        wall_s=time.perf_counter() - started,
        replay=run.replay_of is not None,
        stopped=stopped,
        retried_problems=retried,
        forward_passes=forward_passes(parts.model),
        uses_labels=plan.uses_labels,
        on_tuned_set=tuned_set_note(run.manifest),
        warnings=plan_warnings(effective.sampling, effective.n, effective.planned_calls_per_problem)
        if effective
        else [],
        **source.outcome(records),
        **extra,
    )
    run.release()
    if interrupted is not None:
        raise interrupted  # the summary is written; the command says how to resume and exits 128 + signal
    return summary


def forward_passes(model: LanguageModel | None) -> ForwardPasses | None:
    """What a local backend's batches carried in this lifetime (None: it does not batch, or no model ran)."""
    counts = model.batch_counts() if model is not None else None
    if counts is None:
        return None
    per_batch = counts.rows / counts.batches if counts.batches else None
    return ForwardPasses(batches=counts.batches, rows=counts.rows, rows_per_batch=per_batch, max_rows=counts.max_rows)


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


async def _drive(
    session: Session,
    source: Source,
    learner: Learner,
    ctx: MethodContext,
    observer: RunObserver,
    checkpoints: RoundCheckpoints,
    ceiling: int,
) -> None:
    async def refresh() -> None:
        while True:
            observer.tick(checkpoints.finished_rounds())
            await asyncio.sleep(0.5)

    refresher = asyncio.create_task(refresh())
    undo = _stop_on_signals(ctx.engine)
    try:
        with method_calls(ctx, ceiling):
            await session.drive(source, learner, ctx.problem_concurrency, observer.note)
    except asyncio.CancelledError:
        stop = ctx.engine.stop
        if isinstance(stop, Interrupted):
            raise stop from None  # the grace period ran out, or a second signal came
        raise
    finally:
        undo()
        refresher.cancel()
        if ctx.engine.model is not None:
            await ctx.engine.model.aclose()
        # Whatever is left (calls of an abandoned problem) ends here, its errors collected, so an error that
        # stopped the run is reported once, by the caller, and not again by asyncio's shutdown.
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
