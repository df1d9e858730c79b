"""A served run that learns from the questions it is asked, without labels (`serve --method ttrl`).

The server holds one online TTRL learner, the stream's (`methods/ttrl/online.py`). A request is answered as a
stream's arrival is: a vote among the evaluation's samples of the current weights. Once it is answered and
appended it joins the learner's buffer, and every `update_every` requests an update comes due: it runs in the
background, one at a time, on its own window (the last `window` requests up to its due point, plus `replay`
older ones), so no request waits for training. Meanwhile the weights as they were go on answering; the trained
ones are loaded before they replace them, between two requests' votes (a vote that started on the old weights
finishes on them, and they are dropped once the last such vote ends). Every reply names the weights that
answered it (`MODEL+ttrl@STEPS`, the base model's name before the first update).

The run directory records the updates as a stream's: `stream/updates.jsonl`, each update's `ttrl/steps.jsonl`
(steps, rewards, votes, the label-free health signals, the collapse alarm) and a `train_step` ledger line per
optimiser step. Served again on its `--out`, the run answers with the last finished update's weights from its
first request; an update that was due or in flight runs again in the background (from its last checkpoint).
`collapse=stop` freezes the weights once the alarm fires; `freeze=true` serves the weights as they are and
trains nothing (updates that come due meanwhile run once it is served without it).
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

from testtime.core.errors import RunStopped
from testtime.core.records import Message, Problem
from testtime.core.results import ProblemResult, StreamUpdate
from testtime.core.rollout import RolloutEngine
from testtime.methods import MethodContext
from testtime.methods.learner import Learner
from testtime.methods.majority import vote
from testtime.methods.ttrl.online import OnlineTTRL
from testtime.run.directory import RunDir
from testtime.run.engine import method_calls
from testtime.run.stream import StreamFiles


def prompt_of(problem: Problem) -> list[Message]:
    """A served request's prompt, as it was sent (kept in its problem's metadata for the updates to train on)."""
    return [Message.model_validate(m) for m in problem.metadata["messages"]]


class ServedLearning:
    """The server's learner: the weights that answer now, the updates that run behind them."""

    def __init__(self, online: OnlineTTRL, ctx: MethodContext, directory: RunDir) -> None:
        """`online`: the server's method's learner on `ctx`, the server's context (its plan, seed and run folder;
        each request's prompt kept in its problem: `prompt_of`)."""
        self.ctx, self.online = ctx, online
        self.online.serving = True
        self.directory, self.files = directory, StreamFiles(directory.path)
        self.arrivals = 0  # requests that entered the learner, in every lifetime of the run
        self.task: asyncio.Task[None] | None = None
        self.voting: Counter[int] = Counter()  # votes under way per engine (by id): retired weights wait for them
        self.retired: dict[int, RolloutEngine] = {}
        self.failed: str | None = None  # an update that raised: the weights stay as they are, the server goes on
        self.warn: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)

    @property
    def weights(self) -> str:
        """The name of the weights that answer now."""
        return self.online.engine.model_name

    def health(self) -> dict[str, Any]:
        """What `/health` says of the learning: the weights answering, the updates made, whether one is training."""
        online = self.online
        return {
            "weights": self.weights,
            "updates": online.updates,
            "steps": online.steps,
            "updating": self.task is not None and not self.task.done(),
            "requests": len(online.buffer),
            "frozen": bool(online.settings.freeze or online.collapsed or self.failed),
        }

    async def open(self) -> str:
        """Rebuild what an earlier lifetime learned (the buffer, the last finished update's weights) and start
        the updates that were due; what was done, for the console."""
        records = [r for r in self.directory.read_results() if r.answered_with is not None]
        problems = self.directory.read_problems()
        buffer = [problems[r.problem_id] for r in records if r.problem_id in problems]
        self.files.repair()
        updates = self.files.read_updates()
        await self.online.restore_state(buffer, updates)
        self.arrivals = max((r.answered_with.arrival + 1 for r in records if r.answered_with), default=0)
        self._start_updates()
        if not records:
            return ""
        due = self.online.due()
        return (
            f"learning resumed: {len(buffer)} requests learned from, {len(updates)} updates; answering with "
            f"{self.weights}" + (f"; {due} due update(s) run in the background" if due else "")
        )

    def arrival(self, ctx: MethodContext) -> Learner:
        """The learner one request is answered through (its own prompt, seed and plan)."""
        return ServedArrival(self, ctx)

    # -- updates ----------------------------------------------------------------------------------------------

    def _start_updates(self) -> None:
        if self.online.settings.freeze or self.failed or (self.task is not None and not self.task.done()):
            return
        if self.online.due() and self.ctx.engine.stop is None:
            self.task = asyncio.create_task(self._updates())

    async def _updates(self) -> None:
        """Every due update, one after the other, each swapping its weights in when it is done."""
        try:
            with method_calls(self.ctx):
                while self.online.due() and self.ctx.engine.stop is None:
                    before = self.online.engine
                    update = await self.online.update()
                    self.files.append_update(update)
                    self._retire(before)
                    self._said(update)
        except RunStopped:
            return  # the server is stopping: the step in flight was checkpointed, and runs again on restart
        except Exception as exc:  # noqa: BLE001 - a failed update must not take the endpoint down with it
            self.failed = f"{type(exc).__name__}: {exc}"
            self.warn(
                f"update {self.online.updates + 1} failed ({self.failed}); serving {self.weights}, learning no more"
            )

    def _said(self, update: StreamUpdate) -> None:
        alarm = f"; collapse alarm: {self.online.collapsed} (weights frozen)" if self.online.collapsed else ""
        self.warn(
            f"update {self.online.updates}: {len(update.learned_from)} requests, {update.seconds:.0f} s; "
            f"now answering with {self.weights}{alarm}"
        )

    def _retire(self, engine: RolloutEngine) -> None:
        """Weights replaced by an update are dropped once no vote is still drawing from them."""
        if engine is self.online.engine:
            return
        self.retired[id(engine)] = engine
        self._drop_unused()

    def borrow(self) -> tuple[RolloutEngine, int]:
        """The weights that answer now and their steps, held until `give_back` (an update may replace them)."""
        engine = self.online.engine
        self.voting[id(engine)] += 1
        return engine, self.online.steps

    def give_back(self, engine: RolloutEngine) -> None:
        self.voting[id(engine)] -= 1
        self._drop_unused()

    def _drop_unused(self) -> None:
        for key in [k for k in self.retired if not self.voting[k]]:
            engine = self.retired.pop(key)
            if engine.model is not None:
                asyncio.get_running_loop().create_task(engine.model.aclose())

    async def close(self) -> None:
        """Stop an update in flight at its next optimiser step (checkpointed: a restart runs it again) and wait
        for it; the server's engine is stopped by then."""
        if self.task is not None and not self.task.done():
            if self.ctx.engine.stop is None:
                self.ctx.engine.request_stop(RunStopped("the server stopped"))
            await asyncio.gather(self.task, return_exceptions=True)
        await self.online.close()


class ServedArrival(Learner):
    """One request in the served learner: answered by the weights current when its vote starts, then buffered."""

    kind = "weights"

    def __init__(self, learning: ServedLearning, ctx: MethodContext) -> None:
        self.learning, self.ctx = learning, ctx
        self.steps = 0
        self.weights = learning.weights  # the name of the weights that answered, once it is answered

    @property
    def state(self) -> int:
        return self.steps

    async def answer(self, problem: Problem, arrival: int | None) -> ProblemResult:
        learning = self.learning
        if learning.ctx.engine.stop is not None:
            raise learning.ctx.engine.stop
        engine, self.steps = learning.borrow()
        self.weights = engine.model_name
        place, learning.arrivals = learning.arrivals, learning.arrivals + 1
        try:
            result = await vote(problem, self.ctx, engine)
        finally:
            learning.give_back(engine)
        return result.model_copy(update={"answered_with": self.answered_with(place)})

    async def learn(self, problem: Problem, result: ProblemResult) -> StreamUpdate | None:
        self.learning.online.buffer.append(problem)
        self.learning._start_updates()
        return None  # recorded by the update itself, when it has run
