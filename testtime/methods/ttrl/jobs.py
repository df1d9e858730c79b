"""What offline and online TTRL share around the trainer: a training run handed to TRL's thread from the run's
event loop (`train`), and the engine that samples from trained weights (`trained_engine`)."""

from __future__ import annotations

import asyncio
import ctypes
import gc
from collections.abc import Callable, Sequence
from pathlib import Path

from testtime.core.model import LanguageModel
from testtime.core.records import Problem
from testtime.core.rollout import RolloutEngine
from testtime.methods import MethodContext
from testtime.methods.ttrl.settings import TTRLSettings
from testtime.methods.ttrl.trl_backend import TrainingJob, train_ttrl
from testtime.selectors import SelectionContext, Selector


async def train(
    ctx: MethodContext,
    *,
    model_path: str,
    problems: Sequence[Problem],
    settings: TTRLSettings,
    workdir: Path,
    model_name: str,
    selector: Selector,
    context: Callable[[Problem], SelectionContext],
    seed: int,
    earlier_steps: tuple[Path, ...] = (),
) -> Path:
    """Train on a thread; the trained weights' folder. A stop signal ends it at a checkpointed step and raises."""
    loop = asyncio.get_running_loop()
    job = TrainingJob(
        model_path=model_path,
        problems=problems,
        prompt=ctx.prompt,
        settings=settings,
        rollout=ctx.sampled("ttrl_rollout"),
        workdir=workdir,
        ledger=ctx.engine.ledger,
        model_name=model_name,
        selector=selector,
        context=context,
        seed=seed,
        # the trainer's thread hands each step's votes back to this loop, where the sandbox and engine live
        run_async=lambda coroutine: asyncio.run_coroutine_threadsafe(coroutine, loop).result(),
        oracle=ctx.oracle,
        stop_requested=lambda: ctx.engine.stop is not None,
        earlier_steps=earlier_steps,
    )
    final = await asyncio.to_thread(train_ttrl, job)
    give_back_memory()
    if final is None or ctx.engine.stop is not None:  # a stop signal: the step in flight was checkpointed
        raise ctx.engine.stop or RuntimeError("TTRL training ended early without a stop")
    return final


def give_back_memory() -> None:
    """Return a finished trainer's memory to the system before the trained weights load: glibc keeps what was
    freed, and a stream's resident memory grew by about 0.7 GB an update without this (flat with it)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return  # not glibc: nothing to trim


def trained_engine(ctx: MethodContext, model: LanguageModel, model_name: str) -> RolloutEngine:
    """Trained weights behind the run's cache, ledger, trace, retries and budgets; `model_name` (naming the
    training) keys the cache, so no answer of other weights comes back from it."""
    return ctx.engine.with_model(model, model_name)
