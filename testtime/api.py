"""The public Python API: what is listed in `__all__` here is supported and documented; every other module is
private by name (it may change between versions). `import testtime` exposes the same names lazily.

    import testtime
    result = testtime.run_method("majority", bench="arith", model="fake:echo", n=4, limit=5)
    result.summary.accuracy, result.predictions()[0].prediction, result.path

The CLI's `run` goes through `execute_run` below, so a run started from Python writes the same directory,
ledger and summary as one started from the shell, and `testtime view`, `report` and `load_runs` read both.
Extension points (registries and base classes) are listed for plugins (`testtime.core.plugins` loads them).
The function is `run_method`, not `run`: `testtime.run` is the (private) package that holds the run loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from testtime.benchmarks.base import BENCHMARKS, Benchmark, Grade, SealedReferences
from testtime.benchmarks.dataset import grade_answer
from testtime.core.answers import equivalent, extract_answer
from testtime.core.answers.freeform import final_reply
from testtime.core.asyncs import off_loop
from testtime.core.calls import Calls
from testtime.core.errors import UserError
from testtime.core.model import LanguageModel
from testtime.core.options import Options, flag
from testtime.core.plugins import load_plugins, use_plugin_files
from testtime.core.programs import extract_program
from testtime.core.records import Candidate, Completion, Message, Problem, Reference, SamplingParams
from testtime.core.results import ProblemResult, ResultRecord, Selection
from testtime.core.selection import CandidateScore
from testtime.evaluation.labelfree import Prediction
from testtime.evaluation.summary import RunSummary
from testtime.experiments.runs import load_runs
from testtime.methods import METHODS, Method, MethodContext, PerProblem, SelectorChoice, make_candidates
from testtime.methods.learner import Learner
from testtime.methods.plan import Plan, ProblemSet, RunBase
from testtime.methods.ttrl.rewards import REWARDS
from testtime.models import DEFAULT_MODEL, MODELS
from testtime.run.observer import RunObserver
from testtime.run.settings import ResumeChanges, RunSettings, absolute_paths
from testtime.selectors import SELECTORS, SelectionContext, Selector

__all__ = [
    "BENCHMARKS",
    "DEFAULT_MODEL",
    "METHODS",
    "MODELS",
    "REWARDS",
    "SELECTORS",
    "Benchmark",
    "Calls",
    "Candidate",
    "CandidateScore",
    "Completion",
    "Grade",
    "LanguageModel",
    "Learner",
    "Message",
    "Method",
    "MethodContext",
    "Options",
    "PerProblem",
    "Plan",
    "Prediction",
    "Problem",
    "ProblemResult",
    "ProblemSet",
    "Reference",
    "ResultRecord",
    "RunBase",
    "RunResult",
    "RunSettings",
    "RunSummary",
    "SamplingParams",
    "SealedReferences",
    "Selection",
    "SelectionContext",
    "Selector",
    "SelectorChoice",
    "UserError",
    "equivalent",
    "execute_run",
    "extract_answer",
    "extract_program",
    "final_reply",
    "flag",
    "grade_answer",
    "load_plugins",
    "load_runs",
    "make_candidates",
    "open_run",
    "replay",
    "resume",
    "run_method",
    "use_plugin_files",
]

T = TypeVar("T")


@dataclass(frozen=True)
class RunResult:
    """A run directory, read: its summary and records typed, and where it lies."""

    path: Path
    summary: RunSummary

    def results(self) -> list[ResultRecord]:
        """One graded record per problem (results.jsonl), in the order they finished."""
        from testtime.run.directory import RunDir

        return RunDir.open_existing(self.path).read_results()

    def predictions(self) -> list[Prediction]:
        """The label-free answers to hand on (predictions.jsonl), one per problem."""
        from testtime.run.directory import RunDir

        return RunDir.open_existing(self.path).read_predictions()


def run_method(
    method: str = "majority",
    bench: str = "arith",
    model: str = DEFAULT_MODEL,
    *,
    out: str | Path | None = None,
    method_options: dict[str, Any] | None = None,
    bench_options: dict[str, Any] | None = None,
    selector: str | None = None,
    selector_options: dict[str, Any] | None = None,
    observer: RunObserver | None = None,
    **settings: Any,
) -> RunResult:
    """Run `method` on `bench` (a registered benchmark, a data file, or `hf:ORG/NAME`) with `model`, as
    `testtime run` does; `settings` are `RunSettings` fields (n, limit, seed, temperature, max_tokens,
    concurrency, data_dir, max_cost, ...). Without `out`, the run goes to runs/<time>-<method>-<bench>-<model>."""
    from testtime.run import lifecycle

    for name, text in (("method", method), ("bench", bench), ("model", model)):
        _text(name, text)
    if selector is not None:
        _text("selector", selector)
    _observer(observer)
    given = {"method_options": method_options, "bench_options": bench_options, "selector_options": selector_options}
    for name, value in given.items():
        if value is not None and not isinstance(value, Mapping):
            raise UserError(f"{name} takes a dict of option names to values, not {type(value).__name__}")
    options = dict(method_options or {})
    if selector is not None or selector_options:
        if not issubclass(METHODS.get(method).Options, SelectorChoice):  # type: ignore[attr-defined]
            raise UserError(f"method {method} selects nothing: selector and selector_options do not apply")
        if selector is not None:
            options["selector"] = selector
        if selector_options:
            options["selector_options"] = dict(selector_options)
    _check_setting_names(method, bench, settings)
    run_settings = _settings(
        method=method, bench=bench, model=model, method_options=options, bench_options=dict(bench_options or {}),
        **settings,
    )  # fmt: skip
    opened = lifecycle.create(run_settings, _path("out", out) if out is not None else None)
    return _finish(opened, observer)


def resume(
    path: str | Path, *, retry_errors: bool = True, observer: RunObserver | None = None, **changes: Any
) -> RunResult:
    """Continue a killed or stopped run; `changes` are `ResumeChanges` (budgets, api_base, timeout, concurrency)."""
    from testtime.run import lifecycle

    if not isinstance(retry_errors, bool):
        raise UserError(f"retry_errors takes True or False, not {type(retry_errors).__name__}")
    _observer(observer)
    opened = lifecycle.resume(_path("path", path), _validated(ResumeChanges, changes))
    return _finish(opened, observer, retry_errors=retry_errors)


def replay(path: str | Path) -> RunResult:
    """Re-score a run from its cache into a new run beside it, making no model call."""
    from testtime.run import lifecycle

    return _finish(lifecycle.replay(_path("path", path)), None)


def open_run(path: str | Path) -> RunResult:
    """A finished (or stopped) run directory, read without writing to it."""
    from testtime.run.directory import RunDir

    directory = RunDir.open_existing(_path("path", path))
    summary = directory.read_summary()
    if summary is None:
        raise UserError(f"{path} has no summary yet: it is unfinished (resume it) or still running")
    return RunResult(directory.path, summary)


def execute_run(
    opened: Any, observer: RunObserver | None = None, retry_errors: bool = True, ray: str | None = None
) -> RunSummary:
    """Run an opened run (`run/lifecycle.py`) here, or as Ray shards when its settings ask for them; the CLI's
    `run` calls this too. Safe inside a running event loop (a notebook): the run then gets a thread of its own."""
    if opened.settings.shards:
        from testtime.run.ray_shards import execute_on_ray

        address = ray or _default_ray_address()
        return off_loop(lambda: execute_on_ray(opened, address, observer))
    from testtime.run.execute import execute

    return off_loop(lambda: execute(opened, observer, retry_errors=retry_errors))


def _finish(opened: Any, observer: RunObserver | None, retry_errors: bool = True) -> RunResult:
    try:
        summary = execute_run(opened, observer, retry_errors=retry_errors)
    finally:
        opened.release()
    return RunResult(opened.path, summary)


def _default_ray_address() -> str:
    """A Ray run without an address: the cluster RAY_ADDRESS names, else a Ray of this process."""
    import os

    return "auto" if os.environ.get("RAY_ADDRESS") else "local"


def _text(name: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise UserError(f"{name} takes a name (a non-empty str), not {type(value).__name__} {value!r:.60}")
    return value


def _observer(value: object) -> None:
    """A progress observer is anything with RunObserver's methods (`observer=object()` once failed mid-run)."""
    missing = [m for m in ("start", "problem_done", "tick", "stop", "note") if not callable(getattr(value, m, None))]
    if value is not None and missing:
        raise UserError(f"observer takes a RunObserver (start, problem_done, tick, stop, note); it lacks {missing[0]}")


def _path(name: str, value: object) -> Path:
    if not isinstance(value, (str, Path)) or value == "":
        raise UserError(f"{name} takes a folder's path (str or Path), not {type(value).__name__}")
    return Path(value)


def _check_setting_names(method: str, bench: str, settings: Mapping[str, Any]) -> None:
    """A keyword that is no run setting but the method's or the benchmark's option: say where it goes."""
    import difflib

    from testtime.benchmarks import options_of

    known = set(RunSettings.model_fields)
    for name in settings:
        if name in known:
            continue
        if name in METHODS.get(method).Options.model_fields:  # type: ignore[attr-defined]
            raise UserError(
                f"{name} is an option of method {method}: run_method(..., method_options={{{name!r}: ...}})"
            )
        if name in options_of(bench).model_fields:  # type: ignore[attr-defined]
            raise UserError(
                f"{name} is an option of benchmark {bench}: run_method(..., bench_options={{{name!r}: ...}})"
            )
        close = difflib.get_close_matches(name, sorted(known), n=1)
        hint = f"; did you mean {close[0]}?" if close else " (method_options= and bench_options= take the others)"
        raise UserError(f"run_method has no setting {name!r}{hint}")


def _settings(**given: Any) -> RunSettings:
    return _validated(RunSettings, absolute_paths(given))


def _validated(model: type[T], given: dict[str, Any]) -> T:
    from pydantic import ValidationError

    from testtime.core.errors import first_error

    try:
        return model(**given)  # type: ignore[call-arg]
    except ValidationError as exc:
        where, message = first_error(exc)
        raise UserError(f"{where}: {message}") from None
