"""What offline and online TTRL share: one learner (`TTRLLearner`: weights that a training run on TRL's thread
replaces, behind an engine of their own over the run's cache, ledger and budgets) on two schedules.

Offline (`offline.py`, the paper's): one update over the whole set before any answer. Online (`online.py`): an
update every `update_every` arrivals of a stream, over a window of them."""

from __future__ import annotations

import asyncio
import ctypes
import gc
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

from testtime.core.errors import UserError
from testtime.core.records import Problem
from testtime.methods import MethodContext
from testtime.methods.learner import Learner
from testtime.methods.ttrl.recipe import TTRLSettings
from testtime.methods.ttrl.trl_backend import TrainingJob, train_ttrl
from testtime.models import resolve_model
from testtime.selectors import SelectionContext

if TYPE_CHECKING:
    from testtime.methods.ttrl import TTRL


class TTRLLearner(Learner):
    """Weights, and the engine that samples from them: the base model's until a training run replaces them."""

    kind: ClassVar[Literal["none", "memory", "weights"]] = "weights"

    def __init__(self, method: TTRL, ctx: MethodContext) -> None:
        if ctx.engine.model is None or ctx.workdir is None:
            raise UserError("ttrl trains: it cannot be replayed from the cache; use --resume")
        self.method, self.ctx, self.settings = method, ctx, method.settings
        assert ctx.plan.selector is not None and ctx.plan.samples is not None, "ttrl's plan names both"
        self.selector, self.samples = ctx.plan.selector, ctx.plan.samples  # the vote's rule; samples an answer has
        self.workdir: Path = ctx.workdir
        self.provider = ctx.engine.model_name.partition(":")[0]
        self.weights: str = ctx.engine.model.path  # type: ignore[attr-defined]
        self.engine = ctx.engine
        self.steps = 0  # optimiser steps taken: the state an answer names
        self.serving = False  # a served run: the current weights keep answering while an update trains

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
        free_current: bool = True,
        daemon: bool = False,
    ) -> None:
        """Train the current weights on `problems` into `workdir` (its `ttrl/`) on TRL's thread; the trained ones
        become current (`load` puts them behind an engine). A stop signal ends training at a checkpointed step
        and raises. `free_current`: drop the current weights from memory first (nothing answers meanwhile); a
        server keeps them answering. `daemon`: train on a daemon thread, which a stopping server may abandon (a
        step on a CPU outlasts any drain timeout) and a restart redoes from its start (so it writes no checkpoints)."""
        ctx, loop = self.ctx, asyncio.get_running_loop()
        if free_current and self.engine.model is not None:
            await self.engine.model.aclose()  # free these weights before the trainer loads its own copy
        job = TrainingJob(
            model_path=self.weights,
            problems=problems,
            prompt=ctx.prompt,
            settings=settings,
            rollout=ctx.sampled("ttrl_rollout"),
            workdir=workdir,
            ledger=ctx.engine.ledger,
            model_name=ctx.engine.model_name,
            selector=self.selector,
            context=context,
            seed=seed,
            # the trainer's thread hands each step's votes back to this loop, where the sandbox and engine live
            run_async=lambda coroutine: asyncio.run_coroutine_threadsafe(coroutine, loop).result(),
            oracle=ctx.oracle,
            stop_requested=lambda: ctx.engine.stop is not None,
            earlier_steps=earlier_steps,
            vote_stop=ctx.plan.adaptive,
            checkpoints=not daemon,  # an abandoned update starts again; it writes none
        )
        final = await (in_daemon_thread(train_ttrl, job) if daemon else asyncio.to_thread(train_ttrl, job))
        give_back_memory()
        if final is None or ctx.engine.stop is not None:  # a stop signal: the step in flight was checkpointed
            raise ctx.engine.stop or RuntimeError("TTRL training ended early without a stop")
        self.weights = str(final)

    async def load(self, name: str) -> None:
        """The current weights behind the run's cache, ledger, trace, retries and budgets (`with_model`); `name`
        keys the cache, so no answer of other weights comes back from it."""
        model = resolve_model(f"{self.provider}:{self.weights}", max_batch=self.ctx.engine.concurrency)
        warm = getattr(model, "load", None)  # hf: loads on first use unless asked
        if self.serving and callable(warm):  # loaded before they answer: no request waits for the weights
            await asyncio.to_thread(warm)
        self.engine = self.ctx.engine.with_model(model, name)

    async def close(self) -> None:
        if self.engine is not self.ctx.engine and self.engine.model is not None:
            await self.engine.model.aclose()


async def in_daemon_thread(function: Callable[[TrainingJob], Path | None], job: TrainingJob) -> Path | None:
    """`function(job)` on a daemon thread: the process may end while it runs (the interpreter joins the default
    executor's threads at exit, so a stopping server would wait out a whole optimiser step)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Path | None] = loop.create_future()

    def settle(result: Path | None, error: BaseException | None) -> None:
        if not future.done():
            future.set_exception(error) if error is not None else future.set_result(result)

    def run() -> None:
        try:
            outcome: tuple[Path | None, BaseException | None] = (function(job), None)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting coroutine, which raises it
            outcome = (None, exc)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:
            return  # the loop closed while training ran: nobody waits for it any more

    threading.Thread(target=run, name="ttrl-update", daemon=True).start()
    return await future


def give_back_memory() -> None:
    """Return a finished trainer's memory to the system before the trained weights load: glibc keeps what was
    freed, and a stream's resident memory grew by about 0.7 GB an update without this (flat with it)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return  # not glibc: nothing to trim
