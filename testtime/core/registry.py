"""Name → factory registries: one per extension point (models, methods, selectors, benchmarks, sandboxes)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from testtime.core import plugins
from testtime.core.errors import UserError

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps a short name to a factory; unknown names fail with the list of what exists."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._factories: dict[str, Callable[..., T]] = {}
        self._help: dict[str, str] = {}
        self._plugin_of: dict[str, str] = {}  # names a plugin registered → the plugin

    def register(self, name: str, help: str = "") -> Callable[[Callable[..., T]], Callable[..., T]]:
        def decorate(factory: Callable[..., T]) -> Callable[..., T]:
            plugin = plugins.loading_plugin()
            if name in self._factories:
                if plugin is not None or name not in self._plugin_of:
                    raise ValueError(f"{self.kind} '{name}' registered twice")
                # a built-in loaded after a plugin took its name: the built-in keeps it
                plugins.warn(f"plugin {self._plugin_of.pop(name)}'s {self.kind} '{name}' is a built-in's name: ignored")
            if plugin is not None:
                self._plugin_of[name] = plugin
            self._factories[name] = factory
            doc_lines = (factory.__doc__ or "").strip().splitlines()
            self._help[name] = help or (doc_lines[0] if doc_lines else "")
            return factory

        return decorate

    def create(self, name: str, **kwargs: object) -> T:
        return self.get(name)(**kwargs)

    def get(self, name: str) -> Callable[..., T]:
        if name not in self._factories:
            raise UserError(
                f"unknown {self.kind} '{name}'; available: {', '.join(self.names())} (a plugin's? give --plugin "
                "FILE.py, or install the package that declares it)"
            )
        return self._factories[name]

    def names(self) -> list[str]:
        return sorted(self._factories)

    def describe(self) -> dict[str, str]:
        return {name: self._help.get(name, "") for name in self.names()}
