"""The per-problem knowledge list TRT carries between rounds: "don't" insights (and optional "do"s).

Caps and pruning: at most `max_items` active items (oldest dropped first, default 5 as the released code),
a token budget (rough 4-characters-per-token estimate), near-duplicates merged, at most one deactivation per
round (the reflection may ask for it), and for math at most `reasons_per_answer` items per rejected answer.
`render()` is the one way the list becomes prompt text.
"""

from __future__ import annotations

import difflib
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

NEAR_DUPLICATE = 0.9


class KnowledgeItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: int
    text: str
    kind: Literal["dont", "do"] = "dont"
    round: int = 0
    source: str = "reflection"  # reflection | refutation
    rejected_answer: str | None = None  # math: the answer this item refutes
    active: bool = True


def estimate_tokens(text: str) -> int:
    return (len(text) + 3) // 4


def _normal(text: str) -> str:
    return re.sub(r"\W+", " ", text.lower()).strip()


def near_duplicate(a: str, b: str) -> bool:
    """Same lesson in other words: very similar text with the same numbers ("n = 0" and "n = 1" differ)."""
    if re.findall(r"\d+", a) != re.findall(r"\d+", b):
        return False
    return difflib.SequenceMatcher(None, _normal(a), _normal(b)).ratio() >= NEAR_DUPLICATE


class KnowledgeList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[KnowledgeItem] = []
    max_items: int = 5
    max_tokens: int = 2000
    reasons_per_answer: int = 2
    next_id: int = 1

    def active(self) -> list[KnowledgeItem]:
        return [item for item in self.items if item.active]

    def add(
        self,
        text: str,
        round_: int,
        *,
        kind: Literal["dont", "do"] = "dont",
        source: str = "reflection",
        rejected_answer: str | None = None,
    ) -> KnowledgeItem | None:
        """Add an item unless it nearly duplicates an active one; then enforce the caps. None if merged."""
        text = text.strip()
        if not text:
            return None
        for item in self.active():
            if near_duplicate(item.text, text):
                item.round = round_  # the same lesson again: keep one, refreshed
                return None
        item = KnowledgeItem(
            id=self.next_id, text=text, kind=kind, round=round_, source=source, rejected_answer=rejected_answer
        )
        self.next_id += 1
        self.items.append(item)
        self._prune(rejected_answer)
        return item

    def deactivate(self, item_id: int) -> bool:
        for item in self.items:
            if item.id == item_id and item.active:
                item.active = False
                return True
        return False

    def _prune(self, rejected_answer: str | None) -> None:
        if rejected_answer is not None:
            same = [i for i in self.active() if i.rejected_answer == rejected_answer]
            for item in same[: max(0, len(same) - self.reasons_per_answer)]:
                item.active = False
        while len(self.active()) > self.max_items or (
            len(self.active()) > 1 and estimate_tokens(self.render()) > self.max_tokens
        ):
            self.active()[0].active = False  # oldest first

    def render(self) -> str:
        """The prompt text of the active items, numbered by their ids (the reflection refers to them)."""
        if not self.active():
            return ""
        lines = [f"[{item.id}] {'Do' if item.kind == 'do' else 'Do not'}: {item.text}" for item in self.active()]
        return "\n".join(lines)

    def tokens(self) -> int:
        return estimate_tokens(self.render())
