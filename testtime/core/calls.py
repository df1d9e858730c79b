"""A problem's model calls: the one way a method or a selector asks the model.

`ctx.on(problem)` (a method's context) and `SelectionContext.calls` (a selector's) are a `Calls`, bound to one
problem, the sampling the plan set for each kind of call, and the run's seed. `await calls.sample(kind, n,
messages=None, *, step=None, slot=None)` sends what the plan set for `kind` (a kind the plan did not declare is a
`PlanError` before anything is paid), names the problem and the kind on every ledger line, asks the problem's
own prompt unless given `messages`, and derives the call's seed here (`core/seeds.py`): with a `slot`, the
step's and slot's seed (a multi-step method's calls, none replaying another); without, the plan's. What the
manifest records for a kind is therefore what its calls sent, and nothing a method passes can make it otherwise.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from testtime.core.errors import PlanError
from testtime.core.records import Completion, Message, SamplingParams
from testtime.core.rollout import RolloutEngine
from testtime.core.seeds import problem_rng, slot_seed


@dataclass(frozen=True)
class Calls:
    """One problem's model calls, at the plan's sampling (kind of call → what those calls send)."""

    engine: RolloutEngine
    sampling: Mapping[str, SamplingParams]
    problem_id: str
    prompt: Sequence[Message] = ()  # the problem's prompt, asked when a call names no messages
    seed: int = 0
    owner: str = "the method"  # who makes the calls, for the error that names an undeclared kind

    def __post_init__(self) -> None:
        if not self.problem_id:
            raise PlanError(f"{self.owner} made a model call tied to no problem: ask through ctx.on(problem)")

    def declares(self, kind: str) -> bool:
        return kind in self.sampling

    def params(self, kind: str, step: int | None = None, slot: int | None = None) -> SamplingParams:
        """What a call of this kind sends: the plan's sampling, with the step's and slot's seed when a slot is
        named. An undeclared kind is the caller's bug, said in one line."""
        if kind not in self.sampling:
            declared = ", ".join(sorted(self.sampling)) or "none"
            raise PlanError(f"{self.owner} makes '{kind}' calls; its plan declares {declared}")
        params = self.sampling[kind]
        if slot is not None:
            params = params.model_copy(update={"seed": slot_seed(self.seed, step or 0, slot)})
        return params

    async def sample(
        self,
        kind: str,
        n: int = 1,
        messages: Sequence[Message] | None = None,
        *,
        step: int | None = None,
        slot: int | None = None,
        first: int | None = None,
    ) -> list[Completion]:
        """`n` samples of one call of `kind` (the problem's prompt unless `messages`); `step` goes on the ledger
        lines (the round or step the call belongs to). A second call with the same messages continues where
        the first stopped (new samples); `first=0` asks for the first call's samples again."""
        params = self.params(kind, step, slot)
        asked = list(self.prompt) if messages is None else messages  # the engine refuses what is not messages
        return await self.engine.draw(
            asked, n, params, problem_id=self.problem_id, purpose=kind, step=step, first=first
        )

    def rng(self, step: int | None = None) -> random.Random:
        """The problem's own generator for `step` (a round's shuffle, an aggregation's picks)."""
        return problem_rng(self.seed, self.problem_id, step)

    def with_engine(self, engine: RolloutEngine) -> Calls:
        """The same calls through another engine (TTRL's trained weights, `RolloutEngine.with_model`)."""
        return replace(self, engine=engine)
