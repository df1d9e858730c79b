"""A served run that learns from the questions it is asked, without labels (`serve --method ttrl`): its HTTP-facing
half (what a request is answered by, what `/health` says, resuming on the same `--out`). The schedule — windows,
the gate, the weights kept and rollback — is the TTRL package's (`methods/ttrl/background.py`).

A request is answered as a stream's arrival is: a vote among the evaluation's samples of the weights that serve
(or of the kept weights its model name asks for, `MODEL+ttrl@STEPS`). Once answered it is admitted to an update's
window, held out for the gate's probe, or answered and not learned from (`methods/ttrl/admission.py`), and its
`requests.jsonl` line says which (`client`, `learned`, `learned_why`) and names the weights that answered it.

Served again on its `--out`, the run rebuilds the probe and the windows from `requests.jsonl`, the kept weights
and the updates from `stream/updates.jsonl`, and serves what served when it stopped (the last accepted update's
weights, or an operator's later choice in `stream/weights.jsonl`; `--method-opt weights=STEPS|base` overrides
both, recorded); an update that was due or in flight runs again in the background.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from testtime.core.records import Message, Problem
from testtime.core.results import ProblemResult, StreamUpdate
from testtime.methods import MethodContext
from testtime.methods.learner import Learner
from testtime.methods.majority import vote
from testtime.methods.ttrl.admission import Admission
from testtime.methods.ttrl.background import BackgroundUpdates
from testtime.methods.ttrl.online import OnlineTTRL
from testtime.run.directory import RunDir
from testtime.run.engine import method_calls
from testtime.run.stream import StreamFiles


def prompt_of(problem: Problem) -> list[Message]:
    """A served request's prompt, as it was sent (kept in its problem's metadata for the updates to train on)."""
    return [Message.model_validate(m) for m in problem.metadata["messages"]]


class ServedLearning:
    """The server's learner: what answers now, and the updates behind it."""

    def __init__(self, online: OnlineTTRL, ctx: MethodContext, directory: RunDir) -> None:
        """`online`: the server's method's learner on `ctx`, the server's context (its plan, seed and run folder;
        each request's prompt kept in its problem: `prompt_of`)."""
        self.ctx, self.online = ctx, online
        self.online.serving = True
        self.directory, self.files = directory, StreamFiles(directory.path)
        self.arrivals = 0  # requests answered, in every lifetime of the run
        self.warn: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)
        self.background = BackgroundUpdates(
            online, ctx, self.files, lambda line: self.warn(line), guarded=lambda: method_calls(ctx)
        )

    @property
    def weights(self) -> str:
        """The name of the weights that serve now."""
        return self.background.name(self.background.serving)

    def health(self) -> dict[str, Any]:
        return self.background.health()

    def sent(self) -> str:
        """What each request is answered by, for the console at start."""
        s = self.online.settings
        return (
            f"learning server: each request is answered by a vote of {s.eval_samples} samples at temperature "
            f"{s.eval_temperature:g}, {s.max_response} new tokens each; an update every {s.update_every} requests "
            f"learned from (its window: the last {s.window}), {s.gate_probe} questions held out for the gate"
            + ("" if s.gate else " (gate off)")
            + f", the last {s.keep_weights} accepted weights kept"
        )

    async def open(self) -> str:
        """Rebuild what an earlier lifetime learned and serve what served then; what was done, for the console."""
        background, s = self.background, self.online.settings
        records = [r for r in self.directory.read_results() if r.answered_with is not None]
        problems = self.directory.read_problems()
        requests = {str(entry.get("id")): entry for entry in self.directory.read_requests()}
        for record in records:
            problem, entry = problems.get(record.problem_id), requests.get(record.problem_id, {})
            if problem is None:
                continue
            admission = Admission.recorded(entry.get("learned"), entry.get("learned_why"))
            background.windows.restore(problem, str(entry.get("client") or "unknown"), admission)
            background.answered[problem.id] = record.prediction is not None
        self.arrivals = max((r.answered_with.arrival + 1 for r in records if r.answered_with), default=0)
        self.files.repair()
        updates = self.files.read_updates()
        await background.restore(updates, s.weights)
        background.start()
        if not records:
            return ""
        due = background.windows.due()
        trained = {pid for u in updates if u.outcome in (None, "accepted", "refused") for pid in u.learned_from}
        return (
            f"learning resumed: {len(updates)} updates learned from {len(trained)} requests, "
            f"{len(background.windows.admitted) - len(trained)} more admitted and waiting; answering with "
            f"{self.weights}" + (f"; {due} due update(s) run in the background" if due else "")
        )

    def arrival(self, ctx: MethodContext, client: str, weights: str | None) -> Learner:
        """The learner one request is answered through (its own prompt, seed and plan; its client; the kept
        weights its model name asks for)."""
        return ServedArrival(self, ctx, client, weights)

    async def move(self, asked: str) -> str:
        """An operator's move of the serving weights (the admin route)."""
        return await self.background.move(asked, "admin")

    async def close(self, timeout: float = 0.0) -> bool:
        """Stop the update in flight (abandoned after `timeout` seconds); whether one was abandoned."""
        abandoned = await self.background.close(timeout)
        await self.online.close()
        return abandoned


class ServedArrival(Learner):
    """One request in the served learner: answered by the weights it finds serving (or asks for), then admitted."""

    kind = "weights"

    def __init__(self, learning: ServedLearning, ctx: MethodContext, client: str, pinned: str | None) -> None:
        self.learning, self.ctx, self.client = learning, ctx, client
        self.pinned = learning.background.version(pinned) if pinned is not None else None
        self.steps = 0
        self.weights = learning.weights  # the name of the weights that answered, once it is answered
        self.admission: Admission | None = None

    @property
    def state(self) -> int:
        return self.steps

    async def answer(self, problem: Problem, arrival: int | None) -> ProblemResult:
        learning = self.learning
        if learning.ctx.engine.stop is not None:
            raise learning.ctx.engine.stop
        engine, self.steps = await learning.background.borrow(self.pinned)  # taken together: what answers is named
        self.weights = learning.background.name(self.steps)
        place, learning.arrivals = learning.arrivals, learning.arrivals + 1
        try:
            result = await vote(problem, self.ctx, engine)
        finally:
            learning.background.give_back(self.steps)
        return result.model_copy(update={"answered_with": self.answered_with(place)})

    async def learn(self, problem: Problem, result: ProblemResult) -> StreamUpdate | None:
        self.admission = self.learning.background.admit(problem, self.client, result)
        return None  # recorded by the update itself, when it has run

    def recorded(self) -> dict[str, Any]:
        """What its `requests.jsonl` line says of it: the weights that answered, who asked, whether it is learned."""
        admission = self.admission or Admission(False, "not answered")
        return {"weights": self.weights, "client": self.client, "learned": admission.learned,
                "learned_why": admission.why}  # fmt: skip
