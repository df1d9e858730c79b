"""Methods written against the contract before the plan: they run for one more release, with a warning.

Until the plan (`methods/plan.py`) a method described what it would do in a dozen members (`prepare`,
`sampling`, `effective_n`, `planned_calls`...). A plugin that still defines them keeps working: `legacy_plan`
asks them for its `Plan`, and each one it defines is one warning line naming what replaces it. The release after
this one drops this module and its two callers in `methods/__init__.py`.

A method that calls `ctx.engine.sample(messages, n, params, problem_id=..., purpose=...)` itself, as the contract
before the call handle taught, also keeps running: one warning naming `ctx.on(problem).sample(kind, n)`, and the
engine holds its calls to the same rules as a handle's (a declared kind, a problem, the plan's sampling), so such
a call that would make the manifest untrue is refused before it is paid (`core/rollout.py`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from testtime.methods.plan import GENERIC_FLAGS, Plan, ProblemSet, RunBase

if TYPE_CHECKING:
    from testtime.methods import Method

LEGACY_HOOKS = {
    "prepare": "plan(problems, base, stream), which settles what depends on the problem set",
    "check_model": "plan(), which refuses a model (base.model) with a UserError",
    "check_stream": "plan(), which refuses a stream (its `stream` argument) with a UserError",
    "uses_labels": "Plan.uses_labels",
    "selector_for": "ctx.plan.selector",
    "planned_calls": "Plan.calls",
    "call_kinds": "the kinds in Plan.sampling",
    "sampling": "Plan.sampling",
    "effective_n": "Plan.samples",
    "planned_rounds": "Plan.rounds",
    "describe": "Plan.method (the manifest's record of the method)",
    "run_flags": "Plan.ignores (the generic flags it leaves alone)",
    "flag_hints": "Plan.ignores",
    "default_selectors": "default_selectors on its Options (a SelectorChoice)",
    "default_sampling": "the defaults plan() gives base.sampling()",
    "streaming": "plan()'s `stream` argument (ctx.plan.stream)",
}
SAMPLING_FLAGS = frozenset({"temperature", "top_p", "max_tokens"})  # what the old contract read by default


def warn_legacy(cls: type, hook: str) -> None:
    warnings.warn(
        f"method {cls.__name__}: `{hook}` is from the contract before the plan; use {LEGACY_HOOKS[hook]} "
        "(read for one more release)",
        FutureWarning,
        stacklevel=3,
    )


_WARNED_DIRECT: set[str] = set()  # methods told once in this process that they call the engine themselves


def direct_call_warning(method: str) -> Callable[[str], None]:
    """What a run calls when its method asks the engine itself for a call of `kind` (not through a handle)."""

    def warn(kind: str) -> None:
        if method in _WARNED_DIRECT:
            return
        _WARNED_DIRECT.add(method)
        warnings.warn(
            f"method {method or '(unnamed)'}: ctx.engine.sample(...) is from the contract before the call handle; "
            f"use ctx.on(problem).sample({kind!r}, n), which takes the plan's sampling and names the problem "
            "(read for one more release)",
            FutureWarning,
            stacklevel=3,
        )

    return warn


def warn_selection_without_problem() -> None:
    warnings.warn(
        "ctx.selection() without the problem is from the contract before the call handle: its selector can ask "
        "no model (no test inputs, no judgement); use ctx.selection(problem) (read for one more release)",
        FutureWarning,
        stacklevel=3,
    )


def legacy_plan(method: Method, problems: ProblemSet, base: RunBase, stream: bool) -> Plan:
    """The plan an old-contract method's hooks describe, each asked as the run loop used to ask it."""
    hooks: Any = method  # the hooks live on the plugin's class, not on Method
    domain = problems.domain
    hooks.streaming = stream
    if hasattr(hooks, "check_stream"):
        hooks.check_stream()
    if hasattr(hooks, "check_model"):
        hooks.check_model(base.model)
    selector = None
    if hasattr(hooks, "prepare"):
        hooks.prepare(domain, problems.bench)
        selector = getattr(hooks, "selector", None)
    elif hasattr(method.options, "build"):
        selector = method.options.build(domain, getattr(hooks, "default_selectors", None))
    hooks.selector = selector
    hooks.selector_for = lambda _domain: selector
    selector_kinds = selector.call_kinds() if selector is not None else ()
    kinds = hooks.call_kinds(domain) if hasattr(hooks, "call_kinds") else ("solve", *selector_kinds)
    params = base.sampling(getattr(hooks, "default_sampling", None))
    sampling = hooks.sampling(domain, params) if hasattr(hooks, "sampling") else dict.fromkeys(kinds, params)
    reads = getattr(hooks, "run_flags", SAMPLING_FLAGS)
    hints = getattr(hooks, "flag_hints", {})
    plan = Plan.of(
        method,
        sampling,
        params,
        stream=stream,
        selector=selector,
        samples=hooks.effective_n(base.n) if hasattr(hooks, "effective_n") else base.n,
        calls=hooks.planned_calls(domain, base.n) if hasattr(hooks, "planned_calls") else None,
        rounds=hooks.planned_rounds() if hasattr(hooks, "planned_rounds") else None,
        uses_labels=hooks.uses_labels() if hasattr(hooks, "uses_labels") else False,
        ignores={flag: hints.get(flag, "") for flag in GENERIC_FLAGS if flag not in reads},
    )
    return replace(plan, method=hooks.describe()) if hasattr(hooks, "describe") else plan
