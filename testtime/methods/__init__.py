"""Methods, registered by name: `single`, `majority`, `trt`, `rsa`, `ttrl`.

Contract: `run(problems, ctx) -> MethodResult`. A method sees `Problem`s and a `MethodContext`; neither
can reach a `Reference` (architecture invariant 1). Methods never import `testtime.benchmarks`.
"""

from __future__ import annotations

import asyncio
import importlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from testtime.core.answers import extract_answer
from testtime.core.checkpoint import RoundCheckpoints
from testtime.core.programs import extract_program
from testtime.core.records import Candidate, Completion, Message, Problem, SamplingParams, Selection
from testtime.core.registry import Registry
from testtime.core.rollout import RolloutEngine
from testtime.sandbox import Sandbox


@dataclass
class MethodContext:
    engine: RolloutEngine
    params: SamplingParams
    prompt: Callable[[Problem], list[Message]]
    n: int | None = None  # samples per problem; None = the method's default
    seed: int = 0
    problem_concurrency: int = 256
    sandbox: Sandbox | None = None  # code problems: where candidates and generated tests run
    checkpoints: RoundCheckpoints = field(default_factory=lambda: RoundCheckpoints(None))  # multi-round state
    workdir: Path | None = None  # the run directory, for methods that write artefacts (TTRL's checkpoints)

    def params_for(self, step: int, slot: int) -> SamplingParams:
        """Sampling params with a seed of their own for one call of a multi-step method (its step and slot),
        so no step replays another from the completion cache."""
        return self.params.model_copy(update={"seed": (self.seed * 1_000_003 + step * 1009 + slot) % 2**31})


class ProblemResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    problem_id: str
    prediction: str | None
    candidates: list[Candidate] = []
    selection: Selection | None = None
    details: dict[str, Any] = {}


class MethodResult(BaseModel):
    results: list[ProblemResult]


def option_flag(value: bool | str) -> bool:
    """A boolean method option, given as a bool or as text from --method-opt KEY=VALUE."""
    return value if isinstance(value, bool) else value.strip().lower() in ("1", "true", "yes", "on")


def make_candidates(problem: Problem, completions: Sequence[Completion]) -> list[Candidate]:
    """Completions as candidates: the extracted answer (math) or program (code); None when there is none."""
    extract = extract_program if problem.domain == "code" else extract_answer
    return [
        Candidate(
            index=i,
            text=c.text,
            answer=None if c.error else extract(c.text),
            finish_reason=c.finish_reason,
            error=c.error,
            completion_tokens=c.usage.completion_tokens,
        )
        for i, c in enumerate(completions)
    ]


class Method(ABC):
    name: str

    @abstractmethod
    async def solve(self, problem: Problem, ctx: MethodContext) -> ProblemResult:
        """Solve one problem without labels."""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name}

    def check_model(self, model_spec: str) -> None:  # noqa: B027 - optional hook
        """Refuse a model this method cannot use, before the run directory exists (UserError)."""

    async def stream(self, problems: Sequence[Problem], ctx: MethodContext) -> AsyncIterator[ProblemResult]:
        """Solve problems concurrently, yielding each result as soon as it is ready. The caller grades
        outside the method, so nothing that can reach a reference is ever handed in."""
        slots = asyncio.Semaphore(ctx.problem_concurrency)

        async def one(problem: Problem) -> ProblemResult:
            async with slots:
                return await self.solve(problem, ctx)

        tasks = [asyncio.create_task(one(p)) for p in problems]
        try:
            for finished in asyncio.as_completed(tasks):
                yield await finished
        finally:
            for task in tasks:
                task.cancel()

    async def run(self, problems: Sequence[Problem], ctx: MethodContext) -> MethodResult:
        return MethodResult(results=[result async for result in self.stream(problems, ctx)])


METHODS: Registry[Method] = Registry("method")
_MODULES = ("single", "majority", "trt", "rsa", "ttrl")


def load_methods() -> None:
    for module in _MODULES:
        importlib.import_module(f"testtime.methods.{module}")
