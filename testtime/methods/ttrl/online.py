"""Online TTRL on a stream (`--method ttrl --stream`): the learner (`methods/learner.py`) that answers each
arrival with the weights as they are, and every `update_every` arrivals trains on a window of the latest ones.

An answer: `eval_samples` samples at the evaluation temperature, the selector's vote among them (the same rule
as `--method majority` on the same stream: no adaptation, the baseline). An update: the last `window` arrivals
plus `replay` older ones (a seeded draw), `update_steps` rollout steps of the offline recipe (vote among
N_vote, reward the N_train, GRPO; the same rewards, controls, health signals and collapse alarm, its label
history and alarm carried from update to update; `collapse=stop` freezes the weights for the rest), trained from
the current weights in `stream/update-<k>/` (its own `ttrl/steps.jsonl`, checkpoints and `final/`; once it
is loaded, its checkpoints and the previous update's weights are deleted: a stream keeps one set of weights).
The state an answer names is the optimiser steps taken so far. A resumed stream takes the last finished
update's weights; an update that was due or in flight when the run stopped runs (from its last checkpoint)
before any new arrival. Update k trains on the arrivals up to its due point (k·B), whenever it runs: a served
run (`serve/learning.py`, `serving`) runs updates in the background, answering meanwhile with the weights
it has, so later arrivals may already be buffered when an update starts.
Each update starts a fresh optimiser and schedule on the current weights (the reference trains offline only).
"""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from testtime.core.records import Problem
from testtime.core.results import ProblemResult, StreamUpdate, read_steps
from testtime.methods import MethodContext
from testtime.methods.majority import vote
from testtime.methods.ttrl.jobs import TTRLLearner

if TYPE_CHECKING:
    from testtime.methods.ttrl import TTRL


class OnlineTTRL(TTRLLearner):
    def __init__(self, method: TTRL, ctx: MethodContext) -> None:
        super().__init__(method, ctx)
        self.buffer: list[Problem] = []
        self.updates = 0
        self.collapsed: str | None = None  # the alarm stopped an update (collapse=stop): the weights stay as they are

    async def answer(self, problem: Problem, arrival: int | None) -> ProblemResult:
        ctx = self.ctx
        if ctx.engine.stop is not None:  # stop signals reach the run's engine, not the trained weights' own
            raise ctx.engine.stop
        answered = await vote(problem, ctx, self.engine)
        return answered.model_copy(update={"answered_with": self.answered_with(arrival)})

    async def learn(self, problem: Problem, result: ProblemResult) -> StreamUpdate | None:
        self.buffer.append(problem)
        return await self.update() if self.due() else None

    async def restore(
        self, answered: Sequence[tuple[Problem, ProblemResult]], updates: Sequence[StreamUpdate]
    ) -> tuple[str, list[StreamUpdate]]:
        await self.restore_state([problem for problem, _ in answered], updates)
        note = (
            f"weights of update {self.updates} (step {self.steps}); its buffer of {len(self.buffer)} arrivals rebuilt"
        )
        made = [await self.update() for _ in range(self.due())]  # stopped before (or during) an update: it runs now
        if made:
            note += "; the update that was due ran now (from its last checkpoint), 0 arrivals answered again"
        return note, made

    async def restore_state(self, buffer: Sequence[Problem], updates: Sequence[StreamUpdate]) -> None:
        """The buffer and the last recorded update's weights; an update that finished but was not recorded (a
        kill -9 between the two) deleted those weights, and is made again at once from its own."""
        self.buffer = list(buffer)
        if updates:
            self.updates, self.steps = len(updates), updates[-1].state
            self.collapsed = self._stopped_by_alarm(self.updates)
            self.weights = str(self._folder(self.updates) / "ttrl" / "final")
            if Path(self.weights).is_dir():
                await self._load()

    def due(self) -> int:
        """Updates whose arrivals have all been answered but that have not run (none once the alarm stopped one,
        none while `freeze`)."""
        if self.collapsed or self.settings.freeze:
            return 0
        return len(self.buffer) // self.settings.update_every - self.updates

    def _folder(self, update: int) -> Path:
        return self.workdir / "stream" / f"update-{update}"

    def _steps_file(self, update: int) -> Path:
        return self._folder(update) / "ttrl" / "steps.jsonl"

    def _stopped_by_alarm(self, update: int) -> str | None:
        """The alarm's reason when it stopped this update (`collapse=stop`): no later update runs."""
        if self.settings.collapse != "stop":
            return None
        return next((s.collapse_alarm for s in read_steps(self._steps_file(update)) if s.collapse_alarm), None)

    def _window(self, update: int) -> list[Problem]:
        s = self.settings
        arrived = self.buffer[: update * s.update_every]  # update k's arrivals, whenever it runs
        recent, older = arrived[-s.window :], arrived[: -s.window]
        replayed = random.Random(f"{self.ctx.seed}-replay-{update}").sample(older, min(s.replay, len(older)))
        return recent + replayed

    async def update(self) -> StreamUpdate:
        """The next update: train the current weights on its window, then answer with the trained ones."""
        ctx, s, update = self.ctx, self.settings, self.updates + 1
        window = self._window(update)
        per_step = min(s.prompts_per_step, len(window))
        settings = s.model_copy(
            update={
                "steps": s.update_steps,
                "prompts_per_step": per_step,
                "mini_batch_prompts": s.mini_batch_prompts if per_step % s.mini_batch_prompts == 0 else 1,
            }
        )
        started = time.perf_counter()
        await self.train(
            window,
            settings,
            self._folder(update),
            context=lambda problem: ctx.selection(problem),
            seed=ctx.seed + update,
            earlier_steps=tuple(self._steps_file(k) for k in range(1, update)),
            free_current=not self.serving,
        )
        self.steps += len({step.step for step in read_steps(self._steps_file(update))})
        self.updates = update
        self.collapsed = self._stopped_by_alarm(update)
        await self._load()
        # Only what a resume needs stays: the newest weights (a 135M model's checkpoint is 1.6 GB with its optimiser).
        shutil.rmtree(self._folder(update) / "ttrl" / "checkpoints", ignore_errors=True)
        shutil.rmtree(self._folder(update - 1) / "ttrl" / "final", ignore_errors=True)
        return StreamUpdate(
            state=self.steps,
            arrivals=update * s.update_every,
            learned_from=tuple(p.id for p in window),
            seconds=time.perf_counter() - started,
        )

    async def _load(self) -> None:
        """Its name carries the step, so no answer of another state comes back from the cache."""
        await self.load(f"{self.ctx.engine.model_name}+ttrl@{self.steps}")
