"""What the method now running declared in its plan, as every engine sees it: `declared_calls` holds the plan's
sampling per kind of call and the calls one problem costs while a method runs (a run's loop, a served request),
and `refusal` says why a call may not be sent (an undeclared kind, no problem, other sampling, more samples than
the plan declared for the problem), before anything is paid (`core/rollout.py`). `malformed` says what is wrong
with a call's count or messages, in the run or outside one."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from testtime.core.records import Message, SamplingParams

# The calls one problem may cost when its plan cannot say ahead (TTRL, a plugin's plan without `calls`): the run's
# --max-planned-calls default, the ceiling a whole run's plan is checked against.
MAX_PLANNED_CALLS = 1_000_000


@dataclass(frozen=True)
class _Declared:
    """What the method now running declared in its plan (`methods/plan.py`): kind of call → what it sends."""

    sampling: Mapping[str, SamplingParams]
    direct: Callable[[str], None] | None  # told of a call made on the engine itself, not through a handle
    calls: int | None  # the model calls one problem costs by the plan (None: not known ahead)
    ceiling: int  # the bound on one problem's calls when the plan cannot say (the run's --max-planned-calls)


_DECLARED: ContextVar[_Declared | None] = ContextVar("declared_calls", default=None)
# What a call may differ in from its kind's declared sampling: the seed (a step's and slot's, `core/seeds.py`) and
# the log-probs the engine asks for itself.
_DERIVED = frozenset({"seed", "logprobs"})


@contextmanager
def declared_calls(
    sampling: Mapping[str, SamplingParams],
    direct: Callable[[str], None] | None = None,
    *,
    calls: int | None = None,
    ceiling: int = MAX_PLANNED_CALLS,
) -> Iterator[None]:
    """While a method runs (a run's loop, a served request), every engine refuses a call of a kind the plan did
    not declare, a call tied to no problem, a call whose sampling is not what the plan records for its kind, and
    a call that would take one problem past the `calls` its plan declared (else past `ceiling`): the task that
    enters here and the tasks and threads it starts see the declaration; others do not. `direct` hears of each
    call made with `RolloutEngine.sample` (the contract before the call handle) instead of a handle."""
    token = _DECLARED.set(_Declared(dict(sampling), direct, calls, ceiling))
    try:
        yield
    finally:
        _DECLARED.reset(token)


def told_of_direct_call(purpose: str) -> None:
    """A call made on the engine itself while a method runs: the run hears of it (one warning)."""
    declared = _DECLARED.get()
    if declared is not None and declared.direct is not None:
        declared.direct(purpose)


def malformed(n: object, messages: object) -> str | None:
    """What is wrong with a call's count of samples or its messages (None: nothing), said before anything is sent:
    `n=0` once returned nothing without a word, `n=1.5` or a dict for a message ended in a traceback, and an empty
    conversation was sent upstream and paid."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        return f"a call asking for n={n!r} samples: n is a whole number of samples, 1 or more"
    if isinstance(messages, str | bytes) or not isinstance(messages, list | tuple) or not messages:
        return "a call with no messages: messages is a non-empty list of Message(role=..., content=...)"
    odd = next((m for m in messages if not isinstance(m, Message)), None)
    if odd is not None:
        return f"a call whose messages hold a {type(odd).__name__}: each is a Message(role=..., content=...)"
    return None


def refusal(params: SamplingParams, problem_id: str, purpose: str, n: int = 1, asked: int = 0) -> str | None:
    """Why a call may not be sent while a method runs (None: it may, or no method runs), said before anything is
    paid. `asked`: the samples the problem's calls asked for so far, which with `n` must stay within the calls its
    plan declared (or the run's ceiling, where the plan cannot say)."""
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
    bound = declared.calls if declared.calls is not None else declared.ceiling
    if asked + n > bound:
        what = (
            f"the {bound:,} model calls its plan declares a problem"
            if declared.calls is not None
            else f"the run's ceiling of {bound:,} calls a problem (--max-planned-calls)"
        )
        asking = f"asking for {n:,} samples ({asked:,} asked before)"
        return f"a '{purpose}' call of problem {problem_id} {asking}, past {what}"
    return None
