"""The one place a run's `RolloutEngine` and its method's `MethodContext` are built, for every kind of run
(batch, stream, served, a shard, a replay): the model behind the run directory's ledger, cache and trace, with the
run's retries, budgets, concurrency, log-probs and seed scheme; the context that hands it to the method with the
plan; and `method_calls`, inside which the engine holds every call to that plan. Methods never build either; they
call through `ctx.on(problem)`, and TTRL's trained weights take the engine's place through
`RolloutEngine.with_model`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from testtime.core.cache import CompletionCache
from testtime.core.call_policy import RetryPolicy, TokenPrice
from testtime.core.checkpoint import RoundCheckpoints
from testtime.core.declared import MAX_PLANNED_CALLS, declared_calls
from testtime.core.ledger import Ledger
from testtime.core.oracle import LabelOracle
from testtime.core.records import Message, Problem
from testtime.core.rollout import RolloutEngine
from testtime.core.trace import Trace
from testtime.methods import MethodContext
from testtime.methods.legacy import direct_call_warning
from testtime.methods.plan import Plan
from testtime.run.directory import RunDir
from testtime.run.settings import RunSettings
from testtime.sandbox import Sandbox


def open_engine(settings: RunSettings, model: Any, directory: RunDir, cache_of: RunDir | None = None) -> RolloutEngine:
    """The engine of a run in `directory`; `cache_of`: the run whose cache answers (a replay's source)."""
    return RolloutEngine(
        model,
        model_name=settings.model,
        cache=CompletionCache((cache_of or directory).cache_path),
        ledger=Ledger(directory.ledger_path),
        concurrency=settings.concurrency,
        retry=RetryPolicy(call_timeout_s=settings.request_timeout),
        max_cost_usd=settings.max_cost,
        max_tokens_total=settings.max_tokens_total,
        trace=Trace(directory.path),
        logprobs=settings.logprobs,
        n_per_request=settings.n_per_request,
        seeds=settings.seeds,
        price=TokenPrice(*settings.price) if settings.price else None,
    )


def method_context(
    engine: RolloutEngine,
    plan: Plan,
    prompt: Callable[[Problem], list[Message]],
    seed: int,
    *,
    sandbox: Sandbox | None = None,
    checkpoints: RoundCheckpoints | None = None,
    workdir: Path | None = None,
    oracle: LabelOracle | None = None,
) -> MethodContext:
    """What a method receives, for a batch, stream or shard (`execute.py`) or one served request (`serve/`)."""
    checkpoints = checkpoints or RoundCheckpoints(None)
    checkpoints.track(engine)  # a method resuming from a round continues its draws where the killed run stood
    return MethodContext(
        engine=engine,
        plan=plan,
        prompt=prompt,
        seed=seed,
        sandbox=sandbox,
        checkpoints=checkpoints,
        workdir=workdir,
        oracle=oracle,
    )


@contextmanager
def method_calls(ctx: MethodContext, ceiling: int = MAX_PLANNED_CALLS) -> Iterator[None]:
    """While the method answers: every engine refuses a call its plan did not declare, a call tied to no problem,
    sampling the plan does not record and more samples of a problem than the plan's calls (or `ceiling`, the
    run's --max-planned-calls, where the plan cannot say); a call made on the engine itself (the contract before
    the handle) is one warning (`methods/legacy.py`)."""
    warning = direct_call_warning(str(ctx.plan.method.get("name", "")))
    with declared_calls(ctx.plan.sampling, warning, calls=ctx.plan.calls, ceiling=ceiling):
        yield
