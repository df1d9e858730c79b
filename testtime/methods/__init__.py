"""Methods, registered by name: `single`, `majority`, `trt`, `rsa`, `ttrl`.

The contract a method author learns (the one the run loop calls, `run/loop.py`): `Options` (a pydantic model of
the method's own options and flags), `plan(problems, base, stream) -> Plan` (what it will do on a problem set:
`methods/plan.py`), and `learner(ctx)` (the `Learner`, `methods/learner.py`, that may prepare over a whole set,
answers one problem at a time and may learn after each, for every kind of run: batch, stream, served, shard).
Methods that solve each problem on its own subclass `PerProblem` and write `solve` (their learner is
`NoAdaptation`); TTRL, which trains on the whole set (or on a stream as it goes), writes `learner`. The name is
the one it is registered under. A method sees `Problem`s and a `MethodContext` holding its plan; neither can
reach a `Reference` (architecture invariant 1), and methods never import `testtime.benchmarks`. Every model call
goes through the problem's handle, `ctx.on(problem).sample(kind, n)` (`core/calls.py`), which sends the plan's
sampling for that kind and names the problem, so what the manifest records is what was sent.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from testtime.core.answers import extract_answer
from testtime.core.answers.freeform import final_reply
from testtime.core.calls import Calls
from testtime.core.checkpoint import RoundCheckpoints
from testtime.core.errors import UserError
from testtime.core.options import Options, flag
from testtime.core.oracle import LabelOracle
from testtime.core.programs import extract_program
from testtime.core.records import Candidate, Completion, Message, Problem, SamplingParams
from testtime.core.registry import Registry
from testtime.core.results import ProblemResult
from testtime.core.rollout import RolloutEngine
from testtime.methods.legacy import LEGACY_HOOKS, legacy_plan, warn_legacy, warn_selection_without_problem
from testtime.methods.plan import Plan, ProblemSet, RunBase, settled
from testtime.sandbox import Sandbox
from testtime.selectors import DEFAULTS, SelectionContext, Selector, build_selector

if TYPE_CHECKING:
    from testtime.methods.learner import Learner

SELECTOR_OPTION_NAMES = ("tie_policy", "test_inputs", "predicted_outputs", "timeout_s", "rule")


@dataclass
class MethodContext:
    engine: RolloutEngine
    plan: Plan  # what the method said it will do here: sampling per kind of call, samples, selector
    prompt: Callable[[Problem], list[Message]]
    seed: int = 0
    problem_concurrency: int = 256
    sandbox: Sandbox | None = None  # code problems: where candidates and generated tests run
    checkpoints: RoundCheckpoints = field(default_factory=lambda: RoundCheckpoints(None))  # multi-round state
    workdir: Path | None = None  # the run directory, for methods that write artefacts (TTRL's checkpoints)
    oracle: LabelOracle | None = None  # the labels, opened by the runner only for a plan that uses_labels

    def sampled(self, kind: str) -> SamplingParams:
        """What calls of this kind send: the plan's entry (a kind it did not declare is refused)."""
        return self.plan.sampled(kind)

    def on(self, problem: Problem) -> Calls:
        """The problem's model calls, at the plan's sampling: `await ctx.on(problem).sample(kind, n)`."""
        return Calls(
            self.engine,
            self.plan.sampling,
            problem.id,
            prompt=self.prompt(problem),
            seed=self.seed,
            owner=str(self.plan.method.get("name", "the method")),
        )

    def selection(
        self, problem: Problem | None = None, step: int | None = None, slot: int | None = None
    ) -> SelectionContext:
        """What a selector may use on this problem: seed, its calls (to write tests, to judge), sandbox; never a
        reference. `step` goes on the ledger lines of its calls; `slot` seeds them apart (TRT's test inputs).
        Without a problem (the contract before the call handle), the selector may ask no model: one warning."""
        if problem is None:
            warn_selection_without_problem()
        calls = self.on(problem) if problem is not None else None
        return SelectionContext(seed=self.seed, step=step, slot=slot, calls=calls, sandbox=self.sandbox)


EXTRACTORS: dict[str, Callable[[str], str | None]] = {
    "math": extract_answer,
    "code": extract_program,
    "text": final_reply,
}


def make_candidates(problem: Problem, completions: Sequence[Completion]) -> list[Candidate]:
    """Completions as candidates: the extracted answer (math), program (code) or final reply (text); None when
    there is none."""
    extract = EXTRACTORS[problem.domain]
    return [
        Candidate(
            index=i,
            text=c.text,
            answer=None if c.error else extract(c.text),
            finish_reason=c.finish_reason,
            error=c.error,
            completion_tokens=c.usage.completion_tokens,
            call=c.call,
            token_stats=c.token_stats,
        )
        for i, c in enumerate(completions)
    ]


class SelectorChoice(Options):
    """The options every selecting method shares: which selector, and its options (`--selector`,
    `--selector-opt KEY=VALUE`). None: the domain's default."""

    selector: str | None = flag(
        None, "selector by name (default: majority on math, execution on code, medoid on free-form text)"
    )
    selector_options: dict[str, Any] = Field(default_factory=dict, description="the selector's options")
    default_selectors: ClassVar[Mapping[str, str]] = DEFAULTS  # domain → the selector used when none is named

    def build(self, domain: str, defaults: Mapping[str, str] | None = None) -> Selector:
        """The selector these options name (else the domain's default), checked to serve `domain`."""
        name = self.selector or (defaults or self.default_selectors)[domain]
        selector = build_selector(name, self.selector_options)
        if domain not in selector.domains:
            serves = " and ".join(sorted(selector.domains))
            raise UserError(f"selector {name} cannot choose among {domain} answers; it serves {serves} problems")
        return selector

    @classmethod
    def migrate(cls, values: dict[str, Any]) -> dict[str, Any]:
        """Selector options given as method options (`--method-opt tie_policy=random`, and runs written
        before selectors had options of their own) go to the selector."""
        moved = {k: values.pop(k) for k in SELECTOR_OPTION_NAMES if k in values and k not in cls.model_fields}
        if moved:
            values["selector_options"] = {**moved, **dict(values.get("selector_options") or {})}
        return values


class Method(ABC):
    """A test-time method, registered by name (`@METHODS.register`, which names it). Most methods subclass
    `PerProblem` and write `solve`; `Options` declares the method's own options and flags, `plan` what it will
    do (the default: `solve` calls at the run's sampling, and the selector's calls for a method that selects)."""

    name: ClassVar[str]  # the name it is registered under
    Options: ClassVar[type[Options]] = Options
    _legacy: ClassVar[bool] = False  # written against the contract before the plan (`methods/legacy.py`)

    def __init__(self, **options: Any) -> None:
        """`options`: the method's own (`Options`)."""
        if "streaming" in options:  # before the plan said so (a plugin's own __init__ passed it on)
            warn_legacy(type(self), "streaming")
            options.pop("streaming")
        self.options = self.Options.parse(options, self.name)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = [hook for hook in LEGACY_HOOKS if hook in vars(cls)]
        for hook in own:
            warn_legacy(cls, hook)
        cls._legacy = bool(own) or getattr(cls, "_legacy", False)  # its own old hooks, or a parent's

    def plan(self, problems: ProblemSet, base: RunBase, stream: bool = False) -> Plan:
        """What this method will do on `problems` (settling presets that depend on them), or a one-line UserError
        for a model, a stream or options it cannot run with, before any run directory exists."""
        if self._legacy:
            return legacy_plan(self, problems, base, stream)
        selector = self.options.build(problems.domain) if isinstance(self.options, SelectorChoice) else None
        params = base.sampling()
        return Plan.of(self, {"solve": params}, params, stream=stream, selector=selector, ignores={"n": ""})

    @abstractmethod
    def learner(self, ctx: MethodContext) -> Learner:
        """What answers (and may learn) in the run loop: one problem at a time, after an optional `prepare`
        over the whole set; on a stream (`ctx.plan.stream`), in arrival order."""


class PerProblem(Method):
    """A method that solves each problem on its own; in a batch, problems run concurrently."""

    @abstractmethod
    async def solve(self, problem: Problem, ctx: MethodContext) -> ProblemResult:
        """Solve one problem without labels."""

    def learner(self, ctx: MethodContext) -> Learner:
        from testtime.methods.learner import NoAdaptation

        return NoAdaptation(settled(self, ctx.plan), ctx)


METHODS: Registry[Method] = Registry(
    "method", tuple(f"testtime.methods.{m}" for m in ("single", "majority", "trt", "rsa", "ttrl"))
)


def load_methods() -> None:
    """The built-ins (any read of METHODS loads them too) and the plugins."""
    from testtime.core.plugins import load_plugins

    METHODS.load_builtins()

    load_plugins()  # after the built-ins: a plugin reusing a name fails alone
