"""What the method now running declared in its plan, as every engine sees it: `declared_calls` holds the plan's
sampling per kind of call while a method runs (a run's loop, a served request), and `refusal` says why a call
may not be sent (an undeclared kind, no problem, other sampling), before anything is paid (`core/rollout.py`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from testtime.core.records import SamplingParams


@dataclass(frozen=True)
class _Declared:
    """What the method now running declared in its plan (`methods/plan.py`): kind of call → what it sends."""

    sampling: Mapping[str, SamplingParams]
    direct: Callable[[str], None] | None  # told of a call made on the engine itself, not through a handle


_DECLARED: ContextVar[_Declared | None] = ContextVar("declared_calls", default=None)
# What a call may differ in from its kind's declared sampling: the seed (a step's and slot's, `core/seeds.py`) and
# the log-probs the engine asks for itself.
_DERIVED = frozenset({"seed", "logprobs"})


@contextmanager
def declared_calls(
    sampling: Mapping[str, SamplingParams], direct: Callable[[str], None] | None = None
) -> Iterator[None]:
    """While a method runs (a run's loop, a served request), every engine refuses a call of a kind the plan did
    not declare, a call tied to no problem, and a call whose sampling is not what the plan records for its kind:
    the task that enters here and the tasks and threads it starts see the declaration; others do not. `direct`
    hears of each call made with `RolloutEngine.sample` (the contract before the call handle) instead of a handle."""
    token = _DECLARED.set(_Declared(dict(sampling), direct))
    try:
        yield
    finally:
        _DECLARED.reset(token)


def told_of_direct_call(purpose: str) -> None:
    """A call made on the engine itself while a method runs: the run hears of it (one warning)."""
    declared = _DECLARED.get()
    if declared is not None and declared.direct is not None:
        declared.direct(purpose)


def refusal(params: SamplingParams, problem_id: str, purpose: str) -> str | None:
    """Why a call may not be sent while a method runs (None: it may, or no method runs), said before anything is
    paid."""
    declared = _DECLARED.get()
    if declared is None:
        return None
    if purpose not in declared.sampling:
        kinds = ", ".join(sorted(declared.sampling)) or "none"
        return f"a '{purpose}' call, which the method's plan did not declare (it declares {kinds})"
    if not problem_id:
        return f"a '{purpose}' call tied to no problem: ask through ctx.on(problem), which names it on every line"
    planned = declared.sampling[purpose]
    differs = [
        f"{name} {getattr(params, name)!r} (the plan records {getattr(planned, name)!r})"
        for name in type(params).model_fields
        if name not in _DERIVED and getattr(params, name) != getattr(planned, name)
    ]
    if differs:
        return f"a '{purpose}' call sending {', '.join(differs)}: take its sampling from the plan, ctx.on(problem)"
    return None
