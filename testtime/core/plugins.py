"""Plugins: methods, rewards, selectors, benchmarks and model providers from outside the package, without
forking it. They register into the same registries as the built-ins, so the CLI (`run`, `list`, `--help`),
`serve` and the Python API find them by name.

Two ways in (inspect_ai's and lighteval's habits):
- an installed package that declares entry points in the `testtime` group; each names a module (imported,
  so its `@METHODS.register(...)`-style decorators run) or a callable (called with no arguments);
- a file: `testtime --plugin FILE.py` (repeatable, before or after the command), or `TESTTIME_PLUGINS`
  (paths joined by `os.pathsep`), which is how the processes a run starts (Ray shards, TTRL jobs) get them.

A plugin never replaces a built-in: one that registers a taken name fails alone, and a built-in that loads
after a plugin took its name takes it back (`core/registry.py`), with a warning either way. A plugin that fails
to load (an exception, `sys.exit` or `os._exit`, a `KeyboardInterrupt`, or over `IMPORT_TIMEOUT_S`: each loads in
a thread of its own, abandoned at the bound whatever it does with signals) is one line on stderr naming it,
never a traceback that stops unrelated commands. Each package's loader (`load_methods`, `load_selectors`, ...)
calls `load_plugins` after its own built-ins, so only a command that looks a name up loads them: `testtime
--help` and `--version` never do.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path

from testtime.core.errors import UserError

GROUP = "testtime"
ENV = "TESTTIME_PLUGINS"
TIMEOUT_ENV = "TESTTIME_PLUGIN_TIMEOUT"
IMPORT_TIMEOUT_S = 30.0  # a plugin that imports torch takes seconds; one that hangs is cut, in one line


@dataclass
class _State:
    loaded: bool = False
    loading: bool = False
    names: list[str] = field(default_factory=list)  # what loaded, for `list`
    failures: list[str] = field(default_factory=list)  # one line each
    sources: list[str] = field(default_factory=list)  # the plugins' files and package folders, to name a failure


_state = _State()
_loading = threading.local()  # the plugin whose load runs in this thread: what the registries record as origin


def use_plugin_files(paths: list[str]) -> None:
    """Files given with `--plugin`: checked now, loaded with the others, and handed to child processes."""
    resolved: list[str] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.suffix != ".py" or not path.is_file():
            raise UserError(f"--plugin {raw}: not a readable .py file")
        resolved.append(str(path.resolve()))
    known = [p for p in os.environ.get(ENV, "").split(os.pathsep) if p]
    os.environ[ENV] = os.pathsep.join(dict.fromkeys([*known, *resolved]))
    if _state.loaded:  # a file given after the registries were first read: load it now
        for path_text in resolved:
            _load_file(Path(path_text))


def load_plugins() -> None:
    """Load every plugin once (after the built-ins, so a clash is the plugin's failure)."""
    if _state.loaded or _state.loading:
        return
    _state.loading = True
    try:
        for point in entry_points(group=GROUP):
            origin = f"{point.name} ({point.value}, from {point.dist.name if point.dist else 'an unknown package'})"
            _state.sources += _package_folder(point.module)
            _guarded(origin, lambda point=point: _call_if_callable(point.load()))
        for path_text in [p for p in os.environ.get(ENV, "").split(os.pathsep) if p]:
            _load_file(Path(path_text))
    finally:
        _state.loading = False
        _state.loaded = True


def loaded_plugins() -> list[str]:
    """What loaded (entry point names and files), for `testtime list`."""
    load_plugins()
    return list(_state.names)


def loading_plugin() -> str | None:
    """The plugin whose code runs now, in this thread (None: the package's own)."""
    return getattr(_loading, "origin", None)


def warn(line: str) -> None:
    """One line on stderr about a plugin, remembered for `testtime list`."""
    _state.failures.append(line)
    print(f"warning: {line}", file=sys.stderr)


def plugin_line(exc: BaseException) -> str | None:
    """Where in a plugin's own code `exc` was raised (`FILE:LINE`, the deepest such frame; a syntax error's own
    place), None when no plugin's code is on its way: a plugin's bug is named where its author looks."""
    import traceback

    places = [(frame.filename, frame.lineno) for frame in traceback.extract_tb(exc.__traceback__)]
    if isinstance(exc, SyntaxError) and exc.filename:
        places.append((exc.filename, exc.lineno))
    mine = [(name, line) for name, line in places if _is_plugin_source(name)]
    return f"{mine[-1][0]}:{mine[-1][1]}" if mine else None


def _is_plugin_source(filename: str) -> bool:
    return any(filename == source or filename.startswith(source + os.sep) for source in _state.sources)


def _package_folder(module: str) -> list[str]:
    """The folder of an entry point's top-level package (or its module file), found without importing it."""
    try:
        spec = importlib.util.find_spec(module.split(".")[0])
    except (ImportError, ValueError):
        return []
    if spec is None or spec.origin is None:
        return []
    origin = Path(spec.origin)
    return [str(origin.parent if origin.name == "__init__.py" else origin)]


def _load_file(path: Path) -> None:
    _state.sources.append(str(path))

    def load() -> None:
        name = f"testtime_plugin_{path.stem}_{abs(hash(str(path))):x}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError("not a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and pydantic look their module up by name
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(name, None)
            raise

    _guarded(str(path), load)


def _call_if_callable(target: object) -> None:
    if callable(target) and not isinstance(target, type):
        target()


def import_timeout_s() -> float:
    """How long one plugin may take to load: `$TESTTIME_PLUGIN_TIMEOUT` seconds, else `IMPORT_TIMEOUT_S`."""
    try:
        value = float(os.environ.get(TIMEOUT_ENV, IMPORT_TIMEOUT_S))
    except ValueError:
        return IMPORT_TIMEOUT_S
    return value if 0 < value < float("inf") else IMPORT_TIMEOUT_S


class PluginExited(Exception):
    """A plugin called `os._exit` while loading: once, the whole run ended there without a word."""


def _bounded(origin: str, load: Callable[[], None]) -> None:
    """`load()` in a thread of its own, abandoned at the import timeout whatever the plugin does with signals (one
    that caught SIGALRM once defeated an alarm-based bound); `os._exit` while it loads is an error, not an exit."""
    timeout = import_timeout_s()
    outcome: list[BaseException | None] = []

    def guarded() -> None:
        _loading.origin = origin  # what the registries credit, in this thread, even after it is abandoned
        try:
            load()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - someone else's code: every way out is reported
            outcome.append(exc)

    real_exit = os._exit
    os._exit = _refuse_exit  # type: ignore[assignment]
    try:
        worker = threading.Thread(target=guarded, name=f"testtime-plugin {origin}", daemon=True)
        worker.start()
        worker.join(timeout)
    finally:
        os._exit = real_exit
    if worker.is_alive():
        raise TimeoutError(f"still loading after {timeout:g} s, abandoned (${TIMEOUT_ENV} sets the bound)")
    if outcome and outcome[0] is not None:
        raise outcome[0]


def _refuse_exit(status: int) -> None:
    raise PluginExited(f"called os._exit({status}) while loading")


def _guarded(origin: str, load: Callable[[], None]) -> None:
    try:
        _bounded(origin, load)
    # someone else's code: any failure is one line, its SystemExit and KeyboardInterrupt too (not ours to obey)
    except (Exception, SystemExit, KeyboardInterrupt) as exc:  # noqa: BLE001
        where = plugin_line(exc)
        warn(f"plugin {origin} failed to load: {type(exc).__name__}: {exc}{f' (at {where})' if where else ''}")
        return
    _state.names.append(origin)
