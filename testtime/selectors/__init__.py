"""Label-free selectors, registered by name: they pick one candidate and say why.

Contract: `select(problem, candidates, context) -> Selection`; `context` carries what a selector may use
besides the candidates (a seed, a sandbox, earlier rounds) — never a reference.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from testtime.core.records import Candidate, Problem, Selection
from testtime.core.registry import Registry


class Selector(ABC):
    name: str

    @abstractmethod
    def select(self, problem: Problem, candidates: Sequence[Candidate], context: dict[str, Any]) -> Selection:
        """Choose among candidates without labels."""


SELECTORS: Registry[Selector] = Registry("selector")
