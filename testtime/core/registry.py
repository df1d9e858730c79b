"""Name → factory registries: one per extension point (models, methods, selectors, benchmarks, sandboxes).

A registry imports its built-in modules the first time anyone reads or writes it, so `import testtime` is
enough for `testtime.SELECTORS.names()` to list `majority`, and a plugin that registers a built-in's name is
refused however early it loads. Plugins load apart (`core/plugins.py`), when a command looks a name up."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Generic, TypeVar

from testtime.core import plugins
from testtime.core.errors import UserError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps a short name to a factory; unknown names fail with the list of what exists."""

    def __init__(self, kind: str, builtins: tuple[str, ...] = ()) -> None:
        """`builtins`: the modules whose import registers this registry's own entries."""
        self.kind = kind
        self.builtins = builtins
        self._loaded = not builtins
        self._factories: dict[str, Callable[..., T]] = {}
        self._help: dict[str, str] = {}
        self._plugin_of: dict[str, str] = {}  # names a plugin registered → the plugin

    def register(self, name: str, help: str = "") -> Callable[[Callable[..., T]], Callable[..., T]]:
        def decorate(factory: Callable[..., T]) -> Callable[..., T]:
            if factory.__module__ not in self.builtins:  # a built-in's own import must not import the others
                self.load_builtins()
            # Credited by where the factory was written: a plugin whose own `register` loads the built-ins runs
            # their registrations while it is "the plugin loading", and must not take credit for them.
            plugin = None if factory.__module__.partition(".")[0] == "testtime" else plugins.loading_plugin()
            if name in self._factories:  # the built-ins are in by now: a plugin cannot take one's name
                raise ValueError(f"{self.kind} '{name}' registered twice")
            if plugin is not None:
                self._plugin_of[name] = plugin
            self._factories[name] = factory
            if isinstance(factory, type) and "name" not in vars(factory):
                factory.name = name  # type: ignore[attr-defined] - a class is named by its registration, once
            doc_lines = (factory.__doc__ or "").strip().splitlines()
            self._help[name] = help or (doc_lines[0] if doc_lines else "")
            return factory

        return decorate

    def create(self, name: str, **kwargs: object) -> T:
        return self.get(name)(**kwargs)

    def load_builtins(self) -> None:
        if self._loaded:
            return
        self._loaded = True  # first: each module's own `register` calls come back here
        for module in self.builtins:
            importlib.import_module(module)

    def get(self, name: str) -> Callable[..., T]:
        self.load_builtins()
        if name not in self._factories:
            raise UserError(
                f"unknown {self.kind} '{name}'; available: {', '.join(self.names())} (a plugin's? give --plugin "
                "FILE.py, or install the package that declares it)"
            )
        return self._factories[name]

    def names(self) -> list[str]:
        self.load_builtins()
        return sorted(self._factories)

    def builtin_names(self) -> list[str]:
        """The package's own entries, no plugin's (a project's tests check these, whatever is installed)."""
        return [name for name in self.names() if name not in self._plugin_of]

    def plugin_of(self, name: str) -> str | None:
        """The plugin that registered `name`; None for a built-in."""
        return self._plugin_of.get(name)

    def describe(self) -> dict[str, str]:
        self.load_builtins()
        return {name: self._help.get(name, "") for name in self.names()}
