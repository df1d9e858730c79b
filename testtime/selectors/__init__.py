"""Label-free selectors, registered by name: they pick one candidate and say why.

Contract: `await selector.select(problem, candidates, ctx) -> Selection`, with `ctx` a `SelectionContext`
holding what a selector may use besides the candidates (a seed, the problem's calls to ask the model for
tests or a judgement, a sandbox, earlier rounds) — never a reference. Every selector puts each candidate in a class (or
marks it abstained) and names the selected class, so a method can read a candidate's agreement with the
choice off the Selection (TTRL's reward). Options are a pydantic model per selector, validated with
one-line errors; `build_selector(name, options)` is how methods get one, so `--selector` and
`--selector-opt` can swap them.
"""

from __future__ import annotations

import functools
import random
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from testtime.core.calls import Calls
from testtime.core.errors import PlanError
from testtime.core.options import Options
from testtime.core.records import Candidate, Completion, Message, Problem, SamplingParams
from testtime.core.registry import Registry
from testtime.core.selection import Selection
from testtime.sandbox import Sandbox


@dataclass(frozen=True)
class SelectionHistory:
    """What earlier rounds established (TRT): rollouts behind each answer, rollouts that refuted each answer
    (this round's included), and the incumbent."""

    support: dict[str, int] = field(default_factory=dict)
    refuted: dict[str, int] = field(default_factory=dict)
    incumbent: str | None = None


@dataclass(frozen=True)
class SelectionContext:
    seed: int = 0
    step: int | None = None  # the round or step the selection belongs to (its calls' ledger lines carry it)
    slot: int | None = None  # seeds its calls apart from the step's other calls (TRT's test inputs)
    calls: Calls | None = None  # the problem's model calls (the execution selector's test inputs, usc's judge)
    sandbox: Sandbox | None = None
    history: SelectionHistory | None = None
    rng: random.Random | None = None  # a caller's own generator (TTRL's reward keeps one across steps)
    inputs: Sequence[str] | None = None  # execution: test inputs written beforehand, instead of asking now

    async def ask(self, kind: str, messages: Sequence[Message]) -> Completion | None:
        """One sample of a `kind` call on the selection's step and slot; None where no model may be asked
        (no calls, or a plan that did not declare the kind)."""
        if self.calls is None or not self.calls.declares(kind):
            return None
        [completion] = await self.calls.sample(kind, 1, messages, step=self.step, slot=self.slot)
        return completion


class Selector(ABC):
    """Chooses among candidates without labels (majority, exclusivity, execution, medoid, usc; a plugin's):
    register with `@SELECTORS.register(name)` and write `select`."""

    name: ClassVar[str]  # the name it is registered under (set by the registration)
    Options: ClassVar[type[Options]] = Options
    domains: ClassVar[frozenset[str]] = frozenset({"math", "code"})  # the problems it can choose among (or text)

    def __init__(self, **options: Any) -> None:
        self.options = self.Options.parse(options, f"selector {self.name}")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every selector's `select` is held to its contract where it is written: the candidate it names is one
        it was given, with that candidate's answer (a plugin's selector reading a hostile reply as candidate 99
        would otherwise record a prediction no candidate gave)."""
        super().__init_subclass__(**kwargs)
        written = cls.__dict__.get("select")
        if written is None or getattr(written, "checked", False):
            return

        @functools.wraps(written)
        async def checked(
            self: Selector, problem: Problem, candidates: Sequence[Candidate], ctx: SelectionContext
        ) -> Selection:
            selection = await written(self, problem, candidates, ctx)
            refused = unfounded(selection, candidates, self.name)
            if refused is not None:
                raise PlanError(f"problem {problem.id}: {refused}")
            return selection

        checked.checked = True  # type: ignore[attr-defined]
        cls.select = checked  # type: ignore[method-assign]

    @abstractmethod
    async def select(self, problem: Problem, candidates: Sequence[Candidate], ctx: SelectionContext) -> Selection:
        """Choose among candidates without labels."""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, **self.options.model_dump()}

    def call_kinds(self) -> tuple[str, ...]:
        """The kinds of model call selecting makes (execution: its test inputs; usc: its judgement)."""
        return ()

    def call_sampling(self, base: SamplingParams) -> dict[str, SamplingParams]:
        """What each of its kinds of call sends, given the run's sampling (`base`): the run's, unless a selector
        asks otherwise (`reflect`'s judgement is greedy)."""
        return dict.fromkeys(self.call_kinds(), base)

    def planned_calls(self) -> int:
        """Model calls selecting one problem makes by construction (at most): one per kind unless said."""
        return len(self.call_kinds())

    def needs_token_stats(self) -> bool:
        """Whether selecting reads each sample's token statistics (a confidence-weighted vote): a run without
        them (`--logprobs`) is refused before anything is paid."""
        return False

    def vote_classes(self, problem: Problem, answers: Sequence[str | None]) -> list[list[int]] | None:
        """The classes a vote over `answers` counts (indices of equivalent answers), for a vote drawn in waves that
        stops once settled (`--adaptive`); None: this selector weighs all the samples together, so it cannot say
        before it has them all (execution, the free-form selectors)."""
        return None

    async def inputs_ahead(self, problem: Problem, candidates: Sequence[Candidate], ctx: SelectionContext) -> list[str]:
        """Inputs written once, before the candidates they will judge exist (TTRL writes them from the base
        model's samples, then every training step's programs run on them); none for a selector that reads
        answers alone. Execution: its model-written test inputs."""
        return []


def unfounded(selection: Selection, candidates: Sequence[Candidate], name: str) -> str | None:
    """Why a selection names no candidate it was given (None: it does, or names none)."""
    if selection.index is None:
        return None
    chosen = next((c for c in candidates if c.index == selection.index), None)
    if chosen is None:
        return f"the {name} selector chose candidate {selection.index}, which it was not given"
    if selection.answer != chosen.answer:
        return (
            f"the {name} selector chose candidate {selection.index} with the answer {selection.answer!r}, which is "
            f"not that candidate's ({chosen.answer!r})"
        )
    return None


SELECTORS: Registry[Selector] = Registry(
    "selector",
    tuple(f"testtime.selectors.{m}" for m in ("majority", "exclusivity", "execution", "freeform", "reflect")),
)
DEFAULTS = {"math": "majority", "code": "execution", "text": "medoid"}


def load_selectors() -> None:
    """The built-ins (any read of SELECTORS loads them too) and the plugins."""
    from testtime.core.plugins import load_plugins

    SELECTORS.load_builtins()

    load_plugins()  # after the built-ins: a plugin reusing a name fails alone


def build_selector(name: str, options: Mapping[str, Any] | None = None) -> Selector:
    load_selectors()
    return SELECTORS.create(name, **dict(options or {}))
