"""Methods, registered by name: `single`, `majority`, `trt`, `rsa`, `ttrl`.

Contract (the one the run loop calls, `run/loop.py`): `method.learner(ctx)` gives the `Learner`
(`methods/online.py`) that may prepare over a whole set, answers one problem at a time and may learn after each,
for every kind of run (batch, stream, served, shard). A method sees `Problem`s and a `MethodContext`; neither
can reach a `Reference` (architecture invariant 1), and methods never import `testtime.benchmarks`. Methods
that solve each problem on its own subclass `PerProblem` and write `solve` (their learner is `NoAdaptation`);
TTRL, which trains on the whole set (or on a stream as it goes), writes `learner`.
Each method declares its options as a pydantic model (`Options`, with its own flags) and the generic run
flags it reads (`run_flags`); `prepare(domain)` builds what depends on the benchmark's domain (its selector)
before any run directory exists. `sampling(domain, base)` says what each kind of call it makes will send
(solve, strategies, reflect, tests, aggregate, TTRL's rollouts and evaluations): the run records that plan
in its manifest and hands it to the method in `MethodContext.sampling`, and the method's calls take their
parameters from it, so what is recorded is what was sent.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from testtime.core.answers import extract_answer
from testtime.core.answers.freeform import final_reply
from testtime.core.checkpoint import RoundCheckpoints
from testtime.core.errors import UserError
from testtime.core.ledger import CallPurpose
from testtime.core.options import Options, flag
from testtime.core.oracle import LabelOracle
from testtime.core.programs import extract_program
from testtime.core.records import Candidate, Completion, Message, Problem, SamplingParams
from testtime.core.registry import Registry
from testtime.core.results import ProblemResult
from testtime.core.rollout import RolloutEngine
from testtime.sandbox import Sandbox
from testtime.selectors import DEFAULTS, SelectionContext, Selector, build_selector

if TYPE_CHECKING:
    from testtime.methods.online import Learner

SAMPLING_FLAGS = frozenset({"temperature", "top_p", "max_tokens"})
SELECTOR_OPTION_NAMES = ("tie_policy", "test_inputs", "predicted_outputs", "timeout_s", "rule")


@dataclass
class MethodContext:
    engine: RolloutEngine
    params: SamplingParams  # the run's base sampling (flags, else defaults); a kind of call may differ
    prompt: Callable[[Problem], list[Message]]
    n: int | None = None  # samples per problem; None = the method's default
    seed: int = 0
    problem_concurrency: int = 256
    sandbox: Sandbox | None = None  # code problems: where candidates and generated tests run
    checkpoints: RoundCheckpoints = field(default_factory=lambda: RoundCheckpoints(None))  # multi-round state
    workdir: Path | None = None  # the run directory, for methods that write artefacts (TTRL's checkpoints)
    sampling: dict[str, SamplingParams] = field(default_factory=dict)  # the method's plan, kind of call → params
    oracle: LabelOracle | None = None  # the labels, opened by the runner only for a method that uses_labels()

    def sampled(self, kind: CallPurpose) -> SamplingParams:
        """What calls of this kind send: the plan's entry, else the run's base sampling."""
        return self.sampling.get(kind, self.params)

    def params_for(self, step: int, slot: int, kind: CallPurpose = "solve") -> SamplingParams:
        """Sampling params with a seed of their own for one call of a multi-step method (its step and slot),
        so no step replays another from the completion cache."""
        seed = (self.seed * 1_000_003 + step * 1009 + slot) % 2**31
        return self.sampled(kind).model_copy(update={"seed": seed})

    def selection(self, step: int | None = None, params: SamplingParams | None = None) -> SelectionContext:
        """What a selector may use here: seed, engine (to write tests), sandbox; never a reference."""
        return SelectionContext(
            seed=self.seed,
            step=step,
            engine=self.engine,
            params=params or self.sampled("tests"),
            sandbox=self.sandbox,
            sampling=self.sampling,
        )


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

    @classmethod
    def migrate(cls, values: dict[str, Any]) -> dict[str, Any]:
        """Selector options given as method options (`--method-opt tie_policy=random`, and runs written
        before selectors had options of their own) go to the selector."""
        moved = {k: values.pop(k) for k in SELECTOR_OPTION_NAMES if k in values and k not in cls.model_fields}
        if moved:
            values["selector_options"] = {**moved, **dict(values.get("selector_options") or {})}
        return values


class Method(ABC):
    """A test-time method, registered by name (`@METHODS.register`). Most methods subclass `PerProblem` and
    write `solve`; the hooks below have defaults, and `Options` declares the method's own options and flags."""

    name: ClassVar[str]
    Options: ClassVar[type[Options]] = Options
    run_flags: ClassVar[frozenset[str]] = SAMPLING_FLAGS  # generic `run` flags this method reads
    flag_hints: ClassVar[dict[str, str]] = {}  # what to use instead of a generic flag it does not read
    default_selectors: ClassVar[dict[str, str]] = DEFAULTS
    # What its calls send when no flag says otherwise (the reference's settings, where the method has one).
    default_sampling: ClassVar[SamplingParams] = SamplingParams()

    def __init__(self, streaming: bool = False, **options: Any) -> None:
        """`streaming`: the run is a stream (`--stream`), answered in arrival order; the plan and options may
        depend on it. `options`: the method's own (`Options`)."""
        self.streaming = streaming
        self.options = self.Options.parse(options, self.name)
        self.selector: Selector | None = None

    def describe(self) -> dict[str, Any]:
        described = {"name": self.name, **self.options.model_dump()}
        if self.selector is not None:
            described["selector"] = self.selector.describe()
        return described

    def check_model(self, model_spec: str) -> None:  # noqa: B027 - optional hook
        """Refuse a model this method cannot use, before the run directory exists (UserError)."""

    def uses_labels(self) -> bool:
        """Whether these options ask for the labels (TTRL's `oracle` reward): the runner then opens the one
        channel to them (`ctx.oracle`) and every record of the run says so. Label-free: False, always."""
        return False

    def prepare(self, domain: str, bench: str = "") -> None:
        """Settle what depends on the benchmark (its domain's selector; a preset's values for this benchmark)
        before any run directory exists. Direct callers may skip it: `selector_for` prepares on first use."""
        if isinstance(self.options, SelectorChoice):
            name = self.options.selector or self.default_selectors[domain]
            self.selector = build_selector(name, self.options.selector_options)
            if domain not in self.selector.domains:
                serves = " and ".join(sorted(self.selector.domains))
                raise UserError(f"selector {name} cannot choose among {domain} answers; it serves {serves} problems")

    def selector_for(self, domain: str) -> Selector:
        """The prepared selector (prepared now if a caller skipped `prepare`, as direct callers may)."""
        if self.selector is None:
            self.prepare(domain)
        if self.selector is None:
            raise TypeError(f"{self.name} does not select")
        return self.selector

    def planned_calls(self, domain: str, n: int | None) -> int | None:
        """Model calls one problem costs by construction (a progress bar's total); None when not known."""
        return None

    def call_kinds(self, domain: str) -> tuple[CallPurpose, ...]:
        """The kinds of model call this method makes on a problem of `domain` (after `prepare`)."""
        return ("solve", *self._selector_calls())

    def _selector_calls(self) -> tuple[CallPurpose, ...]:
        """A selector that asks the model (execution's test inputs, usc's judgement): its calls are the method's."""
        return self.selector.call_kinds() if self.selector is not None else ()

    def _selector_planned_calls(self) -> int:
        """The model calls selecting one problem makes (usc: its judgement and its grouping)."""
        return self.selector.planned_calls() if self.selector is not None else 0

    def sampling(self, domain: str, base: SamplingParams) -> dict[str, SamplingParams]:
        """What each kind of call sends, from the run's base sampling (flags, else the defaults); methods with
        their own per-kind settings override this. Recorded in the manifest, handed back in the context."""
        return {kind: base for kind in self.call_kinds(domain)}

    def effective_n(self, n: int | None) -> int | None:
        """Samples per problem the answer is drawn from, when the method draws a fixed number (else None)."""
        return n

    def planned_rounds(self) -> int | None:
        """Rounds (TRT) or steps (RSA) per problem, for the progress bar; None for single-shot methods."""
        return None

    def check_stream(self) -> None:  # noqa: B027 - optional hook
        """Refuse options that need a stream (or cannot run on one), before the run directory exists."""

    @abstractmethod
    def learner(self, ctx: MethodContext) -> Learner:
        """What answers (and may learn) in the run loop: one problem at a time, after an optional `prepare`
        over the whole set; on a stream, in arrival order."""


class PerProblem(Method):
    """A method that solves each problem on its own; in a batch, problems run concurrently."""

    @abstractmethod
    async def solve(self, problem: Problem, ctx: MethodContext) -> ProblemResult:
        """Solve one problem without labels."""

    def learner(self, ctx: MethodContext) -> Learner:
        from testtime.methods.online import NoAdaptation

        return NoAdaptation(self, ctx)


METHODS: Registry[Method] = Registry(
    "method", tuple(f"testtime.methods.{m}" for m in ("single", "majority", "trt", "rsa", "ttrl"))
)


def load_methods() -> None:
    """The built-ins (any read of METHODS loads them too) and the plugins."""
    from testtime.core.plugins import load_plugins

    METHODS.load_builtins()

    load_plugins()  # after the built-ins: a plugin reusing a name fails alone
