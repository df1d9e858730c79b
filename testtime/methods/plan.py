"""A method's plan: what it will do on a problem set, in one frozen value, settled before the first call.

`Method.plan(problems, base, stream)` returns a `Plan`: the sampling each kind of call sends (solve, strategies,
reflect, tests, aggregate, TTRL's rollouts and evaluations), the samples an answer is drawn from, the rounds and
model calls one problem costs, the selector, whether the labels are read, and which of the run's generic flags
the method leaves alone. The run records it in the manifest (`effective`, and `method` from `Plan.method`), hands
it to the method in `MethodContext.plan`, and serve builds one per request the same way; while a method runs,
its engine refuses a call of a kind the plan did not declare (`core/declared.declared_calls`), so the record
cannot drift from what `solve` does.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from testtime.core.adaptive import Adaptive
from testtime.core.errors import PlanError
from testtime.core.options import Options
from testtime.core.records import SamplingParams
from testtime.selectors import Selector

if TYPE_CHECKING:
    from testtime.methods import Method

Domain = Literal["math", "code", "text"]
M = TypeVar("M", bound="Method")
GENERIC_FLAGS = ("n", "temperature", "top_p", "max_tokens")  # the run's flags a method may read or leave alone


@dataclass(frozen=True)
class ProblemSet:
    """What a plan depends on in the problems: their domain and the benchmark's name (a preset tuned per
    benchmark reads it; a served request has none)."""

    domain: Domain
    bench: str = ""


@dataclass(frozen=True)
class RunBase:
    """What the run brings to a plan: its model, `--n` and the sampling flags as given (None: not given, the
    method's default applies) and the seed."""

    model: str = ""
    n: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int = 0
    adaptive: Adaptive | None = None  # --adaptive: a vote stops once settled (None: it draws its full n)

    def sampling(self, defaults: SamplingParams | None = None) -> SamplingParams:
        """The flags where given, else the method's defaults (`defaults`), else the generic ones; the run's seed."""
        defaults = defaults or SamplingParams()
        return SamplingParams(
            temperature=defaults.temperature if self.temperature is None else self.temperature,
            top_p=defaults.top_p if self.top_p is None else self.top_p,
            max_tokens=defaults.max_tokens if self.max_tokens is None else self.max_tokens,
            seed=self.seed,
        )


@dataclass(frozen=True)
class Plan:
    """What a method will do on one problem set (or one served request)."""

    sampling: Mapping[str, SamplingParams]  # kind of call → what those calls send; no other kind is made
    samples: int | None = None  # samples per problem an answer is drawn from, when a fixed number (else None)
    calls: int | None = None  # model calls one problem costs by construction (None: not known ahead)
    rounds: int | None = None  # rounds (TRT) or steps (RSA) per problem, for progress; None: single-shot
    selector: Selector | None = None  # the label-free selector, for a method that selects
    uses_labels: bool = False  # TTRL's oracle reward: the run opens the labels' one channel and says so
    stream: bool = False  # answered in arrival order (`--stream`)
    method: Mapping[str, Any] = field(default_factory=dict)  # the manifest's `method`: name, options, selector
    ignores: Mapping[str, str] = field(default_factory=dict)  # generic flag it leaves alone → what to use instead
    options: Options | None = None  # the options it settled for these problems (presets); None: as constructed
    adaptive: Adaptive | None = None  # its vote stops once settled (`core/adaptive.py`); None: it draws them all

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset(self.sampling)

    def sampled(self, kind: str) -> SamplingParams:
        """What calls of this kind send; a kind the plan did not declare is the method's bug, said plainly."""
        if kind not in self.sampling:
            declared = ", ".join(sorted(self.sampling)) or "none"
            raise PlanError(
                f"{self.method.get('name', 'the method')} makes '{kind}' calls; its plan declares {declared}"
            )
        return self.sampling[kind]

    @classmethod
    def of(
        cls,
        method: Method,
        sampling: Mapping[str, SamplingParams],
        base: SamplingParams,
        *,
        stream: bool = False,
        selector: Selector | None = None,
        samples: int | None = None,
        calls: int | None = None,
        rounds: int | None = None,
        uses_labels: bool = False,
        ignores: Mapping[str, str] | None = None,
        options: Options | None = None,
        adaptive: Adaptive | None = None,
        **described: Any,
    ) -> Plan:
        """A method's plan from what it settled: the selector's kinds of call join `sampling` at `base` (the run's
        sampling) unless `sampling` sets them; `options`: the method's options as settled for these problems (a
        preset applied), which its learner then runs with; the record of the method is its name, those options,
        `described` (its extras) and the selector."""
        record = {"name": method.name, **(options or method.options).model_dump(), **described}
        if selector is not None:
            record["selector"] = selector.describe()
        asked = selector.call_sampling(base) if selector is not None else {}
        return cls(
            sampling={**asked, **sampling},  # what the method set for a kind wins
            samples=samples,
            calls=calls,
            rounds=rounds,
            selector=selector,
            uses_labels=uses_labels,
            stream=stream,
            method=record,
            ignores=dict(ignores or {}),
            options=options,
            adaptive=adaptive,
        )


def settled(method: M, plan: Plan) -> M:
    """The method with the options its plan settled (a preset applied for the problem set), for its learner:
    planning never changes the method, so a second plan (another problem set) starts from what was given."""
    if plan.options is None or plan.options is method.options:
        return method
    bound = copy.copy(method)
    bound.options = plan.options
    return bound


def completed(method: Method, plan: Plan) -> Plan:
    """The plan as a run records it: one a method built without `Plan.of` gets the method's name and options as
    its manifest record (every reader of a run expects the method's name there)."""
    if plan.method.get("name") == method.name:
        return plan
    return replace(plan, method={"name": method.name, **method.options.model_dump(), **plan.method})
