"""Architecture invariants that are structural: import direction, and labels unreachable from a method."""

from __future__ import annotations

import ast
import functools
import gc
import types
from pathlib import Path

import pytest

from testtime.core.records import Reference

PACKAGE = Path(__file__).resolve().parents[1] / "testtime"

# The floors, top to bottom: cli → experiments / serve → run → evaluation / methods → benchmarks / selectors →
# models / sandbox → core / knowledge. A package may import its own floor's package and anything below it
# (architecture.md, "Packages and what each owns"); nothing points up, and evaluation never reads a method.
_BOTTOM = {"core"}
_MODELS = _BOTTOM | {"models", "sandbox"}
_SELECTION = _MODELS | {"selectors", "benchmarks"}
ALLOWED = {
    "core": {"core"},
    "knowledge": {"core", "knowledge"},
    "models": {"core", "models"},
    "sandbox": {"core", "sandbox"},
    "selectors": {"core", "sandbox", "selectors"},
    "benchmarks": {"core", "sandbox", "benchmarks"},
    "methods": {"core", "models", "selectors", "sandbox", "knowledge", "methods"},
    "evaluation": {"core", "sandbox", "benchmarks", "evaluation"},
    "run": _SELECTION | {"knowledge", "methods", "evaluation", "run"},
    "experiments": _SELECTION | {"knowledge", "methods", "evaluation", "run", "experiments"},
    "serve": _SELECTION | {"knowledge", "methods", "evaluation", "run", "serve"},
    "cli": _SELECTION | {"knowledge", "methods", "evaluation", "run", "experiments", "serve", "cli", "api"},
}
# The public modules at the top: the API stands on every floor but the commands (which stand on it); the TRL
# rewards on the selection core and the reward registry alone.
TOP_MODULES = {
    "api": _SELECTION | {"knowledge", "methods", "evaluation", "run", "experiments"},
    "rewards": _SELECTION | {"methods"},
}


@functools.cache
def _parsed(path: Path) -> tuple[str, tuple[ast.AST, ...]]:
    """A module's text and every node of its syntax tree, read and parsed once for all the rules below."""
    text = path.read_text()
    return text, tuple(ast.walk(ast.parse(text)))


def _text(path: Path) -> str:
    return _parsed(path)[0]


def _nodes(path: Path) -> tuple[ast.AST, ...]:
    return _parsed(path)[1]


def test_every_package_has_a_floor() -> None:
    """A new package must be placed in the table above before it can import anything."""
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages == set(ALLOWED)


def _imported_packages(path: Path) -> set[str]:
    found = set()
    for node in _nodes(path):
        names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
        names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
        for name in names:
            parts = name.split(".")
            if parts[0] == "testtime" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_point_down_the_table(package: str) -> None:
    for path in (PACKAGE / package).rglob("*.py"):
        illegal = _imported_packages(path) - ALLOWED[package]
        assert not illegal, f"{path.relative_to(PACKAGE)} imports {sorted(illegal)}"


@pytest.mark.parametrize("module", sorted(TOP_MODULES))
def test_the_public_modules_stand_below_the_commands(module: str) -> None:
    illegal = _imported_packages(PACKAGE / f"{module}.py") - TOP_MODULES[module]
    assert not illegal, f"{module}.py imports {sorted(illegal)}"


READERS = (
    "evaluation/scoring.py",
    "evaluation/ttrl_audit.py",
    "experiments/report.py",
    "experiments/curves.py",
    "experiments/viewer/data.py",
)
LOADERS = ("testtime.core.results", "testtime.experiments.viewer.data", "testtime.run.directory")


def _imported_modules(path: Path) -> set[str]:
    found = set()
    for node in _nodes(path):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


@pytest.mark.parametrize("reader", READERS)
def test_readers_of_results_use_typed_records_not_method_modules(reader: str) -> None:
    """What scores, audits, plots and reports a run reads the records in core, never a method's own module
    (which would tie them to that method's output shapes)."""
    modules = _imported_modules(PACKAGE / reader)
    assert any(loader in modules for loader in LOADERS)  # the typed records, or a loader of them
    assert not [m for m in modules if m.startswith("testtime.methods")]


# Code and global state are not data handed to a method: walking into them reaches sys.modules and with it
# everything (the import rule above is what keeps methods away from benchmarks' modules).
_NOT_DATA = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.CodeType)


def _reachable(roots: list[object]) -> list[object]:
    """Every object reachable from the roots through data (instances, containers, bound methods' selves)."""
    seen, stack, out = set(), list(roots), []
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _NOT_DATA):
            continue
        seen.add(id(obj))
        out.append(obj)
        stack.extend(gc.get_referents(obj))
    return out


@pytest.mark.parametrize(("bench", "method"), [("aime24", "majority"), ("lcb-v6", "ttrl")])
def test_no_reference_is_reachable_from_what_a_method_receives(shared_data: Path, bench: str, method: str) -> None:
    """Build a method's inputs exactly as `testtime run` does and walk every object they reach: on math, and
    on code with the sandbox that selection and TTRL's code reward run programs in."""
    from testtime.core.cache import CompletionCache
    from testtime.core.ledger import Ledger
    from testtime.core.rollout import RolloutEngine
    from testtime.models import resolve_model
    from testtime.run.build import build_benchmark, build_method, load_problems, plan_of
    from testtime.run.engine import method_context
    from testtime.run.settings import RunSettings
    from testtime.sandbox import SandboxError
    from testtime.sandbox.choose import open_sandbox

    planned_for = "hf:smollm2-135m" if method == "ttrl" else "fake:"  # ttrl plans for local weights only
    config = RunSettings(method=method, bench=bench, model=planned_for, data_dir=str(shared_data))
    benchmark = build_benchmark(config)
    problems, references = load_problems(benchmark, None)
    assert len(references) == len(problems) > 0
    sandbox = None
    if benchmark.needs_sandbox:
        try:
            sandbox = open_sandbox("auto")
        except SandboxError as exc:
            pytest.skip(f"no sandbox: {exc}")
        benchmark.sandbox = sandbox  # shared with grading, as the runner shares it
    try:
        built = build_method(config)
        model = resolve_model("fake:")
        ctx = method_context(
            RolloutEngine(model, model_name="fake:", cache=CompletionCache(None), ledger=Ledger()),
            plan_of(built, config, benchmark.domain, benchmark.name),
            benchmark.prompt,
            0,
            sandbox=sandbox,
        )
        reachable = _reachable([ctx, problems, built, ctx.selection(problems[0])])
        assert any(o is problems[0] for o in reachable)  # the walk really covers what the method gets
        assert [o for o in reachable if isinstance(o, Reference)] == []
    finally:
        if sandbox is not None:
            sandbox.close()


def test_the_walk_would_catch_a_leak(shared_data: Path) -> None:
    """The check above can fail: a reference smuggled onto the benchmark behind ctx.prompt is found."""
    from testtime.run.build import build_benchmark, load_problems
    from testtime.run.settings import RunSettings

    benchmark = build_benchmark(RunSettings(method="single", bench="aime24", model="fake:", data_dir=str(shared_data)))
    problems, references = load_problems(benchmark, 2)
    benchmark.leaked = {"cache": [references[problems[0].id]]}  # type: ignore[attr-defined]
    assert any(isinstance(o, Reference) for o in _reachable([benchmark.prompt, problems]))


@pytest.mark.parametrize("package", ["methods", "selectors", "knowledge", "models", "sandbox", "benchmarks"])
def test_nothing_below_the_scorer_opens_graded_results(package: str) -> None:
    """results.jsonl holds each reference once graded (the viewer and the inspect log show it): no method,
    selector or model may read it, by the run floor's reader (the import rule) or by the file's name."""
    for path in (PACKAGE / package).rglob("*.py"):
        text = _text(path)
        assert "results.jsonl" not in text and "read_results" not in text, path


def test_the_label_channel_opens_only_for_a_method_that_asks() -> None:
    """Every registered method with its defaults is label-free (the runner opens no channel); TTRL with
    reward=oracle asks, and what it gets grades as the benchmark does — a function, never a Reference."""
    from testtime.methods import METHODS, load_methods
    from testtime.run.build import build_parts, label_oracle
    from testtime.run.settings import RunSettings

    load_methods()
    for name in METHODS.builtin_names():
        model = "hf:smollm2-135m" if name == "ttrl" else "fake:"
        parts = build_parts(RunSettings(method=name, bench="arith", model=model, limit=2))
        assert not parts.plan.uses_labels and label_oracle(parts) is None, name
    oracle_run = RunSettings(
        method="ttrl", bench="arith", model="hf:smollm2-135m", limit=2, method_options={"reward": "oracle"}
    )
    parts = build_parts(oracle_run)
    oracle = label_oracle(parts)
    assert parts.plan.uses_labels and oracle is not None
    problem = parts.problems[0]
    truth = parts.references[problem.id].answer
    assert oracle.correct(problem.id, truth) and not oracle.correct(problem.id, f"{truth}1")
    assert not oracle.correct(problem.id, None)
    assert parts.effective().uses_labels


def test_only_the_oracle_reward_and_the_runner_touch_the_label_channel() -> None:
    """The channel's name appears where it is opened (run/), carried (the method context and the one function
    that builds it, TTRL's training job, its trainer and reward step) and read (the oracle reward); nowhere else
    in the package."""
    touching = {
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if "LabelOracle" in _text(path) or "oracle=" in _text(path)
    }
    assert touching == {
        "core/oracle.py",
        "run/build.py",
        "run/execute.py",
        "run/engine.py",
        "methods/__init__.py",
        "methods/ttrl/jobs.py",
        "methods/ttrl/trl_backend.py",
        "methods/ttrl/trl_reward.py",
        "methods/ttrl/rewards.py",
    }


def _calls(name: str) -> set[str]:
    """The package's modules that call `name(...)` (a constructor or function), by AST, not by text."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        for node in _nodes(path):
            if isinstance(node, ast.Call):
                called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
                if called == name:
                    found.add(str(path.relative_to(PACKAGE)))
    return found


def test_one_module_builds_a_runs_engine() -> None:
    """Every kind of run (batch, stream, served, shard, replay, TTRL's trained weights) gets its engine from
    `run/engine.py`, so its ledger, cache, trace, retries and budgets are wired once; `with_model` swaps weights."""
    assert _calls("RolloutEngine") == {"run/engine.py", "core/rollout.py"}
    assert _calls("open_engine") == {"run/execute.py", "serve/session.py"}


def test_one_module_writes_a_runs_summary_and_predictions() -> None:
    """Batch, stream, served and merged runs end in `run/outcome.py` (the directory's own schema upgrade rewrites
    a summary as it was; `grade` summarises another system's predictions and writes no run)."""
    assert _calls("write_summary") == {"run/outcome.py", "run/directory.py"}
    assert _calls("write_predictions") == {"run/outcome.py"}
    assert _calls("summarize") == {"run/outcome.py", "run/grading.py"}


def test_ttrl_asks_its_selector_through_the_contract_never_its_type() -> None:
    """TTRL works with any registered selector (a plugin's too): what execution writes ahead comes through
    `Selector.inputs_ahead`, never an `isinstance` on a selector class."""
    checked = []
    for path in (PACKAGE / "methods" / "ttrl").rglob("*.py"):
        for node in _nodes(path):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance" and len(node.args) == 2:
                kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
                checked += [(path.name, ast.unparse(k)) for k in kinds]
    assert checked and not [c for c in checked if c[1].endswith("Selector")]


def _attribute_calls(receiver: str, attribute: str) -> set[str]:
    """The package's modules that call `<receiver>.<attribute>(...)` (any receiver when `receiver` is empty)."""
    found = set()
    for path in PACKAGE.rglob("*.py"):
        for node in _nodes(path):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == attribute:
                value = node.func.value
                named = value.id if isinstance(value, ast.Name) else getattr(value, "attr", "")
                if not receiver or named == receiver:
                    found.add(str(path.relative_to(PACKAGE)))
    return found


def test_one_loop_answers_every_kind_of_run() -> None:
    """Batch, stream and shard runs (`run/execute.py`, a Ray task included), a Ray run's driver (the shards'
    results as they land) and served requests (`serve/session.py`) open a `Session`; only the loop asks a
    learner for an answer and appends a result, and nothing outside the methods calls `solve`: the step
    answer → grade → append → learn exists once."""
    assert _calls("Session") == {"run/execute.py", "run/ray_shards.py", "serve/session.py"}
    assert _attribute_calls("learner", "answer") == {"run/loop.py"}
    entered = {m for m in _attribute_calls("", "learner") if not m.startswith("methods/")}  # a method's super()
    assert entered == {"run/execute.py", "serve/session.py"}
    assert not {m for m in _attribute_calls("", "solve") if not m.startswith("methods/")}
    assert _calls("append_result") == {"run/loop.py"}


def test_a_method_is_entered_one_way_and_told_it_streams_by_its_plan() -> None:
    """`Method.learner` is the one entry (no `stream` beside it); whether the run streams is the plan's
    (`ctx.plan.stream`), never a flag set on a method (the old contract's, kept only by `methods/legacy.py`)."""
    from testtime.methods import Method, PerProblem

    assert not hasattr(Method, "stream") and "learner" in Method.__abstractmethods__
    assert "learner" not in PerProblem.__abstractmethods__ and "solve" in PerProblem.__abstractmethods__
    for path in PACKAGE.rglob("*.py"):
        if path.name == "legacy.py":
            continue
        for node in _nodes(path):
            targets = node.targets if isinstance(node, ast.Assign) else []
            assert not [t for t in targets if isinstance(t, ast.Attribute) and t.attr == "streaming"], path


def test_a_plan_is_made_in_one_place_per_kind_of_run_and_carried_by_every_context() -> None:
    """Batch, stream, shard and replay runs plan through `run/build.plan_of` (serve's server too, for its
    manifest); a served request plans in `serve/session.py`. Every `MethodContext` is built in one function of
    `run/engine.py`, with a plan, and every kind of run (batch, stream, shard, served) gets its context there."""
    planners = {m for m in _attribute_calls("", "plan") if not m.startswith("methods/")}
    assert planners == {"run/build.py", "serve/session.py"}
    assert _calls("MethodContext") == {"run/engine.py"}
    assert _calls("method_context") == {"run/execute.py", "serve/session.py"}
    for node in _nodes(PACKAGE / "run" / "engine.py"):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "MethodContext":
            assert "plan" in {k.arg for k in node.keywords}


def test_only_the_call_handle_asks_the_engine() -> None:
    """A method's or a selector's model call goes through its problem's handle (`core/calls.py`), which binds the
    problem, the kind and the plan's sampling: nothing in the package calls the engine's own `sample` (the contract
    before the handle, kept for old plugins) and only the handle calls `draw`."""
    assert _attribute_calls("", "draw") == {"core/calls.py", "core/rollout.py"}
    assert not _attribute_calls("engine", "sample")
    assert _calls("Calls") == {"methods/__init__.py", "rewards.py"}  # a method's context; a judge outside a run


def test_no_module_file_name_is_used_three_times() -> None:
    """A module's name says its room: no name (but `__init__.py`) is worn by three or more modules."""
    names: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        names.setdefault(path.name, []).append(str(path.relative_to(PACKAGE)))
    assert {n: ps for n, ps in names.items() if len(ps) >= 3 and n != "__init__.py"} == {}


def test_a_seed_slot_is_a_named_constant() -> None:
    """A multi-step method's seed slot (`calls.sample(kind, n, step=..., slot=...)`) is a name, never a bare
    number: the slots of calls that are not rollouts are constants a reader can find (and a resumed run's cache
    keys depend on them)."""
    slots = []
    for path in (PACKAGE / "methods").rglob("*.py"):
        for node in _nodes(path):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) in ("sample", "selection"):
                slots += [(path.name, k.value) for k in node.keywords if k.arg == "slot"]
    assert slots and not [(name, ast.unparse(s)) for name, s in slots if isinstance(s, ast.Constant)]


def test_every_seed_is_derived_in_one_place() -> None:
    """Sample, step-and-slot and per-problem seeds are `core/seeds.py`'s formulas: no method or selector builds
    a generator from the run's seed and a problem id itself, and no module but `core/seeds.py` holds the
    formulas' constants."""
    for path in PACKAGE.rglob("*.py"):
        text = _text(path)
        if path.name != "seeds.py":
            assert "1_000_003" not in text and "* 1009" not in text, path
    for package in ("methods", "selectors"):
        for path in (PACKAGE / package).rglob("*.py"):
            assert "-{problem.id}" not in _text(path), path
