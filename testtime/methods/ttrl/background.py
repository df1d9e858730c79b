"""A learning endpoint's updates, in the background of its answers: due windows, training, the gate before every
swap, the weights kept, and rollback (`serve --method ttrl`; `serve/learning.py` holds the HTTP side).

Each update trains the serving weights on its window (`admission.py`) in `stream/update-<k>/`; the trained
weights are loaded and answer the probe beside the serving ones (`gate.py`); they replace them only if the gate
accepts and the collapse alarm did not fire during the update (then the endpoint stays on the last accepted
weights; `collapse=stop` also freezes it). An update whose window had no answer to agree on (every vote
abstained) is skipped, not trained. Every update is recorded in `stream/updates.jsonl` with its outcome
(`accepted`, `refused`, `skipped`, `failed`), the gate's figures and the name its weights got.

Weights are named by the optimiser steps this endpoint has taken when they were made (`MODEL+ttrl@STEPS`; a
refused update's steps count too, so no two weights share a name and no cached answer crosses them). The last
`keep_weights` accepted ones stay on disk, older ones are deleted; an operator moves the serving weights to a kept
version or to the base model (`move`, the admin route; `--method-opt weights=` on restart), recorded in
`stream/weights.jsonl`, and later updates train from whatever serves. A failed update leaves the weights as they
are and learning resumes at the next due window; a stop abandons the update in flight (it trains on a daemon
thread) and a restart runs it again.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections import Counter, deque
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from testtime.core.errors import RunStopped, UserError
from testtime.core.records import Problem
from testtime.core.results import GateVerdict, ProblemResult, StreamUpdate, read_steps
from testtime.core.rollout import RolloutEngine
from testtime.methods import MethodContext
from testtime.methods.majority import vote
from testtime.methods.ttrl.admission import Admission, Windows
from testtime.methods.ttrl.gate import judge, verdict
from testtime.methods.ttrl.online import OnlineTTRL
from testtime.models import resolve_model

ABSTAIN_WINDOW = 8  # answered requests the abstention warning looks back over
ABSTAIN_SHARE = 0.5  # ... and the share of them without an answer that it warns at


class UpdateFiles(Protocol):
    """Where updates and an operator's moves are recorded (the run's `stream/`: `run/stream.py`'s StreamFiles)."""

    def append_update(self, update: StreamUpdate) -> None: ...
    def append_move(self, move: dict[str, Any]) -> None: ...
    def read_moves(self) -> list[dict[str, Any]]: ...


class BackgroundUpdates:
    """The weights that serve, the kept ones, and the updates that make new ones. The server that owns it hands
    it where to record (`files`) and the run's guard on a method's calls (`guarded`: its plan bounds the updates'
    calls as it bounds a request's)."""

    def __init__(
        self,
        online: OnlineTTRL,
        ctx: MethodContext,
        files: UpdateFiles,
        warn: Callable[[str], None],
        guarded: Callable[[], AbstractContextManager[None]],
    ) -> None:
        self.online, self.ctx, self.files, self.warn, self.guarded = online, ctx, files, warn, guarded
        s = online.settings
        self.windows = Windows(s.update_every, s.max_client_share, s.gate_probe if s.gate else 0)
        self.base = ctx.engine.model_name
        self.versions: dict[int, str] = {0: online.weights}  # steps → weights folder; 0 is the base model
        self.engines: dict[int, RolloutEngine] = {0: ctx.engine}
        self.serving = 0  # the steps of the weights that answer
        self.trained = 0  # optimiser steps taken by every update, accepted or not: the next name's number
        self.updates: list[StreamUpdate] = []
        self.task: asyncio.Task[None] | None = None
        self.failed: str | None = None  # the last update's failure, until one succeeds
        self.voting: Counter[int] = Counter()  # votes under way per weights (by steps): what must stay loaded
        self.answers: deque[bool] = deque(maxlen=ABSTAIN_WINDOW)  # the last requests: did their vote answer?
        self.answered: dict[str, bool] = {}  # each admitted request: did its vote answer (a window of none: skipped)
        self.warning: str | None = None

    # -- names -----------------------------------------------------------------------------------------------

    def name(self, steps: int) -> str:
        return self.base if steps == 0 else f"{self.base}+ttrl@{steps}"

    def version(self, asked: str) -> int:
        """The kept version a name (`MODEL+ttrl@STEPS`, `base`, `STEPS`, the base name) asks for; else a UserError
        naming the kept ones."""
        text = asked.strip()
        steps = text.rpartition("+ttrl@")[2] if "+ttrl@" in text else text
        if text in ("base", self.base) or steps == "0":
            return 0
        if steps.isdigit() and int(steps) in self.versions:
            return int(steps)
        raise UserError(f"weights {asked!r} are not kept here; kept: {', '.join(self.kept_names())}")

    def kept_names(self) -> list[str]:
        return [self.name(s) for s in sorted(self.versions)]

    # -- answering --------------------------------------------------------------------------------------------

    async def borrow(self, steps: int | None = None) -> tuple[RolloutEngine, int]:
        """The engine of the serving weights (or of kept version `steps`) and their steps, held until
        `give_back`: what answers a request is what its record names, swap or not."""
        chosen = self.serving if steps is None else steps
        if chosen not in self.engines:
            self.engines[chosen] = await self._load(chosen)
        self.voting[chosen] += 1
        return self.engines[chosen], chosen

    def give_back(self, steps: int) -> None:
        self.voting[steps] -= 1
        self._drop_unused()

    def admit(self, problem: Problem, client: str, result: ProblemResult) -> Admission:
        """The answered request's place in what is learned (`admission.py`), after noting whether it answered."""
        self._note_answer(result.prediction is not None)
        self.answered[problem.id] = result.prediction is not None
        if self.online.settings.freeze:
            return Admission(False, "frozen: freeze=true serves the weights as they are")
        if self.online.collapsed:
            return Admission(False, f"frozen: the collapse alarm stopped learning ({self.online.collapsed})")
        admission = self.windows.admit(problem, client, busy=self.updating)
        if admission.learned:
            self.start()
        return admission

    def _note_answer(self, answered: bool) -> None:
        self.answers.append(answered)
        missing = self.answers.count(False)
        warn = len(self.answers) == ABSTAIN_WINDOW and missing >= ABSTAIN_SHARE * ABSTAIN_WINDOW
        if warn and self.warning is None:
            s = self.online.settings
            self.warning = (
                f"{missing} of the last {ABSTAIN_WINDOW} requests got no answer from any of their samples "
                f"({s.eval_samples} samples, {s.max_response} new tokens): a vote with no answer teaches nothing; "
                "ask for a final \\boxed{} answer in the prompt, or raise --method-opt max_response"
            )
            self.warn(f"warning: {self.warning}")
        elif not warn:
            self.warning = None

    # -- updates ----------------------------------------------------------------------------------------------

    @property
    def updating(self) -> bool:
        return self.task is not None and not self.task.done()

    def start(self) -> None:
        """Run the due windows in the background, one at a time (nothing when one is already running)."""
        if self.updating or self.ctx.engine.stop is not None or not self.windows.due():
            return
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        with self.guarded():
            while self.windows.due() and self.ctx.engine.stop is None and not self.online.collapsed:
                number = self.windows.started + 1
                self.windows.started = number
                try:
                    update = await self._update(number)
                except RunStopped:
                    self.windows.started -= 1  # abandoned at a stop: a restart runs it again
                    return
                except Exception as exc:  # noqa: BLE001 - a failed update must not take the endpoint down
                    self.failed = f"{type(exc).__name__}: {str(exc)[:300]}"
                    update = self._record(number, "failed", why=self.failed)
                    self.warn(f"update {number} failed ({self.failed}); serving {self.name(self.serving)}")
                    continue
                self.failed = None
                self._say(update)

    async def _update(self, number: int) -> StreamUpdate:
        s, online = self.online.settings, self.online
        window = self.windows.window(number, s.window)
        started = time.perf_counter()
        if not any(self.answered.get(p.id, True) for p in window):
            return self._record(number, "skipped", window, why="every vote in the window abstained: nothing to learn")
        folder = online._folder(number)
        if not (folder / "ttrl" / "final" / "config.json").is_file():  # (a finished one is only recorded again)
            shutil.rmtree(folder / "ttrl", ignore_errors=True)  # an update a stop abandoned trains from its start
        online.weights = self.versions[self.serving]  # train what serves now
        settings = s.model_copy(update={"steps": s.update_steps, "prompts_per_step": min(s.prompts_per_step,
                                                                                         len(window))})  # fmt: skip
        if settings.prompts_per_step % settings.mini_batch_prompts:
            settings = settings.model_copy(update={"mini_batch_prompts": 1})
        await online.train(
            window,
            settings,
            folder,
            context=lambda problem: self.ctx.selection(problem),
            seed=self.ctx.seed + number,
            earlier_steps=tuple(online._steps_file(k) for k in range(1, number)),
            free_current=False,
            daemon=True,
        )
        steps = read_steps(online._steps_file(number))
        self.trained += len({step.step for step in steps})
        made = self.trained
        alarm = next((step.collapse_alarm for step in steps if step.collapse_alarm), None)
        final = folder / "ttrl" / "final"
        shutil.rmtree(folder / "ttrl" / "checkpoints", ignore_errors=True)  # a finished update needs none
        self.versions[made] = str(final)
        self.engines[made] = await self._load(made)
        held = (made, self.serving)  # both held while the gate votes: no request's give-back or move drops them
        self.voting.update(held)
        try:
            figures = await self._gate(made) if s.gate else None
        finally:
            self.voting.subtract(held)  # released, not dropped: the verdict decides which of them stays
        accepted = alarm is None and (figures is None or figures.accepted)
        if accepted:
            self.serving = made
            self._prune()
        else:
            self._forget(made)
            if alarm is not None and s.collapse == "stop":
                online.collapsed = alarm
        why = None if accepted else (f"collapse alarm: {alarm}" if alarm else figures.why if figures else None)
        return self._record(number, "accepted" if accepted else "refused", window, made, figures, why, started)

    async def _gate(self, made: int) -> GateVerdict | None:
        probe = [p.model_copy(update={"id": f"gate-{made}-{p.id}"}) for p in self.windows.probe]
        if not probe:
            return None
        serving, trained = self.engines[self.serving], self.engines[made]

        async def answer(problem: Problem, which: str) -> ProblemResult:
            return await vote(problem, self.ctx, serving if which == "serving" else trained)

        return verdict(*await judge(probe, answer))

    def _record(
        self,
        number: int,
        outcome: str,
        window: list[Problem] | None = None,
        made: int | None = None,
        gate: GateVerdict | None = None,
        why: str | None = None,
        started: float | None = None,
    ) -> StreamUpdate:
        window = window if window is not None else self.windows.window(number, self.online.settings.window)
        update = StreamUpdate(
            state=self.serving,
            arrivals=number * self.online.settings.update_every,
            learned_from=tuple(p.id for p in window),
            seconds=time.perf_counter() - started if started is not None else 0.0,
            outcome=outcome,  # type: ignore[arg-type]
            weights=self.name(made) if made is not None else None,
            trained_steps=self.trained,
            gate=gate,
            why=why,
        )
        self.files.append_update(update)
        self.updates.append(update)
        self.online.updates, self.online.steps = len(self.updates), self.serving
        return update

    def _say(self, update: StreamUpdate) -> None:
        gate = update.gate
        figures = (
            f"; gate: answer rate {gate.serving.answer_rate:.2f} → {gate.trained.answer_rate:.2f}, samples that loop "
            f"{gate.serving.loop_rate or 0:.2f} → {gate.trained.loop_rate or 0:.2f}, distinct answers "
            f"{gate.serving.distinct_answers} → {gate.trained.distinct_answers}"
            if gate is not None
            else ""
        )
        what = {
            "accepted": f"now answering with {self.name(self.serving)}",
            "refused": f"{update.weights} refused ({update.why}); still answering with {self.name(self.serving)}",
            "skipped": f"skipped ({update.why})",
        }.get(update.outcome or "", "")
        head = f"update {len(self.updates)}: {len(update.learned_from)} requests, {update.seconds:.0f} s"
        self.warn(f"{head}; {what}{figures}")

    # -- weights ----------------------------------------------------------------------------------------------

    async def move(self, asked: str, by: str, record: bool = True) -> str:
        """Serve kept version `asked` (or the base model) from now on, recorded (unless it restores a recorded
        move); its name."""
        steps = self.version(asked)
        if steps not in self.engines:
            self.engines[steps] = await self._load(steps)
        self.serving = steps
        self.online.steps = steps
        if record:
            move = {"weights": self.name(steps), "steps": steps, "after_updates": len(self.updates), "by": by}
            self.files.append_move(move | {"time": time.time()})
        self._drop_unused()
        return self.name(steps)

    async def _load(self, steps: int) -> RolloutEngine:
        if steps == 0:
            return self.ctx.engine
        provider = self.base.partition(":")[0]
        model = resolve_model(f"{provider}:{self.versions[steps]}", max_batch=self.ctx.engine.concurrency)
        warm = getattr(model, "load", None)  # hf: loaded before it answers, so no request waits for it
        if callable(warm):
            await asyncio.to_thread(warm)
        return self.ctx.engine.with_model(model, self.name(steps))

    def _prune(self) -> None:
        """Keep the last `keep_weights` accepted versions (and whatever serves) on disk; delete the rest."""
        kept = sorted(s for s in self.versions if s)
        for steps in kept[: -self.online.settings.keep_weights]:
            if steps != self.serving:
                self._forget(steps)

    def _forget(self, steps: int) -> None:
        folder = Path(self.versions.pop(steps))
        shutil.rmtree(folder, ignore_errors=True)
        self._drop_unused()

    def _drop_unused(self) -> None:
        """Weights that neither serve nor answer a vote under way leave memory (a request naming them reloads)."""
        for steps in [s for s in self.engines if s not in (0, self.serving) and not self.voting[s]]:
            engine = self.engines.pop(steps)
            if engine.model is not None:
                asyncio.get_running_loop().create_task(engine.model.aclose())

    # -- state --------------------------------------------------------------------------------------------

    async def restore(self, updates: list[StreamUpdate], asked: str | None) -> None:
        """An earlier lifetime's updates: accepted ones whose weights are still on disk are kept versions (an older
        run kept only its newest); what served when it stopped serves again (the last accepted update's weights,
        or an operator's later move), unless `asked` (`--method-opt weights=`) chooses, recorded as a move."""
        online = self.online
        self.updates, self.windows.started = list(updates), len(updates)
        for number, update in enumerate(updates, 1):
            if update.outcome in (None, "accepted"):
                final = online._folder(number) / "ttrl" / "final"
                if update.state and final.is_dir():
                    self.versions[update.state] = str(final)
                self.serving = update.state if update.state in self.versions else self.serving
            self.trained = max(self.trained, update.trained_steps or update.state)
        online.updates = len(updates)
        online.collapsed = online._stopped_by_alarm(len(updates)) if updates else None
        chosen = asked or self._last_move(len(updates))
        if chosen is not None:
            try:
                await self.move(chosen, "restart", record=asked is not None)
            except UserError as exc:
                raise UserError(f"--method-opt weights={chosen}: {exc}") from None
        elif self.serving:
            self.engines[self.serving] = await self._load(self.serving)
        online.steps = self.serving

    def _last_move(self, updates: int) -> str | None:
        """An operator's move made after the last recorded update (`stream/weights.jsonl`), if any."""
        moves = self.files.read_moves()
        last = moves[-1] if moves else None
        return str(last["steps"]) if last is not None and last.get("after_updates", 0) >= updates else None

    def health(self) -> dict[str, Any]:
        online, s = self.online, self.online.settings
        state = (
            "frozen: freeze=true" if s.freeze
            else f"frozen: collapse alarm ({online.collapsed})" if online.collapsed
            else f"failed: {self.failed}" if self.failed
            else "on"
        )  # fmt: skip
        refused = sum(u.outcome == "refused" for u in self.updates)
        last = next((u for u in reversed(self.updates) if u.gate is not None), None)
        return {
            "weights": self.name(self.serving),
            "learning": state,
            "frozen": bool(s.freeze or online.collapsed),
            "updates": len(self.updates),
            "refused": refused,
            "steps": self.trained,
            "updating": self.updating,
            "due": self.windows.due() + int(self.updating),
            "requests": len(self.windows.admitted),
            "probe": len(self.windows.probe),
            "kept": self.kept_names(),
            "last_gate": last.gate.model_dump() if last is not None and last.gate is not None else None,
            "warning": self.warning,
        }

    async def close(self, timeout: float) -> bool:
        """Stop: the update in flight stops at its next optimiser step, or is abandoned after `timeout` seconds
        (its thread is a daemon; a restart runs it again). Whether one was abandoned."""
        if self.updating and self.task is not None:
            if self.ctx.engine.stop is None:
                self.ctx.engine.request_stop(RunStopped("the server stopped"))
            done, _ = await asyncio.wait({self.task}, timeout=max(timeout, 0.0))
            if not done:
                self.warn(f"update {self.windows.started} abandoned at the stop; a restart runs it again")
                return True
        for steps, engine in list(self.engines.items()):
            if steps and engine.model is not None:
                await engine.model.aclose()
        return False
