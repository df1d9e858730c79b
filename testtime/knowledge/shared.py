"""Memory across a stream (TRT `--method-opt memory=shared`): lessons one problem's reflection distilled,
carried into the prompts of the problems that arrive after it.

Only lessons that can hold beyond their problem enter: the reflection's own items (not refutations of one
answer, which name that problem's numbers), rewritten by the model to hold beyond it (`methods/trt/memory.py`),
near-duplicates merged into the older item, at most `cap` active (the oldest retired first). Each item keeps
its provenance (the problem that taught it, its arrival) and how many later problems' prompts carried it.
`version` counts the changes: what `answered_with.state` names.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from testtime.core.results import Lesson
from testtime.knowledge import near_duplicate


class MemoryItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: int
    text: str
    taught_by: str  # the problem whose reflection distilled it
    arrival: int  # that problem's place in the stream
    uses: int = 0  # later problems whose prompts carried it
    active: bool = True


class SharedMemory(BaseModel):
    model_config = ConfigDict(extra="forbid")

    items: list[MemoryItem] = []
    cap: int = 8
    version: int = 0
    next_id: int = 1

    def active(self) -> list[MemoryItem]:
        return [item for item in self.items if item.active]

    def shown(self) -> tuple[int, ...]:
        """The items a problem arriving now carries; each counts one use."""
        for item in self.active():
            item.uses += 1
        return tuple(item.id for item in self.active())

    def render(self, ids: Sequence[int]) -> str:
        by_id = {item.id: item for item in self.items}
        lines = [by_id[i] for i in ids if i in by_id]
        return "\n".join(f"[M{i.id}] {i.text}" for i in lines)

    def learn(self, problem_id: str, arrival: int, lessons: Sequence[str]) -> tuple[int, ...]:
        """Take a solved problem's general lessons; the ids added (the version moves when any was)."""
        added = []
        for text in lessons:
            if any(near_duplicate(item.text, text) for item in self.active()):
                continue
            item = MemoryItem(id=self.next_id, text=text, taught_by=problem_id, arrival=arrival)
            self.items.append(item)
            self.next_id += 1
            added.append(item.id)
        while len(self.active()) > self.cap:
            self.active()[0].active = False  # the oldest retires first
        if added:
            self.version += 1
        return tuple(added)


def own_lessons(lessons: Sequence[Lesson]) -> list[Lesson]:
    """A problem's lessons that may hold beyond it: its reflection's, not a refutation of one of its answers."""
    return [x for x in lessons if x.active and x.source == "reflection" and x.rejected_answer is None]
