"""What offline and online TTRL share: one learner (`TTRLLearner`: weights that a training run replaces, behind
an engine of their own) on two schedules, a training run handed to TRL's thread from the run's event loop
(`train`), and the engine that samples from trained weights (`trained_engine`).

Offline (`offline.py`, the paper's): one update over the whole set before any answer. Online (`online.py`): an
update every `update_every` arrivals of a stream, over a window of them."""

from __future__ import annotations

import asyncio
import ctypes
import gc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

from testtime.core.errors import UserError
from testtime.core.model import LanguageModel
from testtime.core.records import Problem
from testtime.core.rollout import RolloutEngine
from testtime.methods import MethodContext
from testtime.methods.online import Learner
from testtime.methods.ttrl.settings import TTRLSettings
from testtime.methods.ttrl.trl_backend import TrainingJob, train_ttrl
from testtime.models import resolve_model
from testtime.selectors import SelectionContext, Selector

if TYPE_CHECKING:
    from testtime.methods.ttrl import TTRL


class TTRLLearner(Learner):
    """Weights, and the engine that samples from them: the base model's until a training run replaces them."""

    kind: ClassVar[Literal["none", "memory", "weights"]] = "weights"

    def __init__(self, method: TTRL, ctx: MethodContext) -> None:
        if ctx.engine.model is None or ctx.workdir is None:
            raise UserError("ttrl trains: it cannot be replayed from the cache; use --resume")
        self.method, self.ctx, self.settings = method, ctx, method.settings
        self.workdir: Path = ctx.workdir
        self.provider = ctx.engine.model_name.partition(":")[0]
        self.weights: str = ctx.engine.model.path  # type: ignore[attr-defined]
        self.engine = ctx.engine
        self.steps = 0  # optimiser steps taken: the state an answer names

    @property
    def state(self) -> int:
        return self.steps

    async def train(
        self,
        problems: Sequence[Problem],
        settings: TTRLSettings,
        workdir: Path,
        context: Callable[[Problem], SelectionContext],
        seed: int,
        earlier_steps: tuple[Path, ...] = (),
    ) -> None:
        """Train the current weights on `problems` into `workdir` (its `ttrl/`); the trained ones become current
        (`load` puts them behind an engine)."""
        if self.engine.model is not None:
            await self.engine.model.aclose()  # free these weights before the trainer loads its own copy
        final = await train(
            self.ctx,
            model_path=self.weights,
            problems=problems,
            settings=settings,
            workdir=workdir,
            model_name=self.ctx.engine.model_name,
            selector=self.method.selector_for(problems[0].domain),
            context=context,
            seed=seed,
            earlier_steps=earlier_steps,
        )
        self.weights = str(final)

    async def load(self, name: str) -> None:
        """The current weights behind their own engine; `name` keys its cache, so no answer of other weights
        comes back from it."""
        model = resolve_model(f"{self.provider}:{self.weights}", max_batch=self.ctx.engine.concurrency)
        self.engine = trained_engine(self.ctx, model, name)

    async def close(self) -> None:
        if self.engine is not self.ctx.engine and self.engine.model is not None:
            await self.engine.model.aclose()


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
