"""TRT on a stream with memory across problems (`--method-opt memory=shared`): the learner (`methods/learner.py`)
that answers each arrival with the shared memory as it stands and then takes the problem's general lessons.

After a problem's rounds, its own lessons (the reflection's, not refutations of its answers) are rewritten by
the model to hold on other problems (one `reflect` call, `prompts.GENERALISE`) and join the memory. The memory
a problem carries is fixed when it arrives (it is part of the problem's checkpointed state), so a problem
resumed mid-rounds sees the same lessons. The memory is a function of the answered problems in arrival order
(each result keeps its final knowledge list; the rewrite comes back from the cache), so a resumed stream
rebuilds it from the results with no paid call; `stream/memory.json` is the readable record, rewritten after
every change.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from testtime.core.records import Message, Problem
from testtime.core.results import ProblemResult, StreamUpdate
from testtime.knowledge.shared import SharedMemory, own_lessons
from testtime.methods import MethodContext
from testtime.methods.learner import Learner
from testtime.methods.trt import prompts
from testtime.methods.trt.method import MEMORY_SLOT
from testtime.methods.trt.parsing import parse_lessons

if TYPE_CHECKING:
    from testtime.methods.trt.method import TRT


class SharedMemoryLearner(Learner):
    kind = "memory"

    def __init__(self, method: TRT, ctx: MethodContext) -> None:
        self.method, self.ctx = method, ctx
        self.memory = SharedMemory(cap=method.options.memory_cap)
        self.path = ctx.workdir / "stream" / "memory.json" if ctx.workdir else None

    @property
    def state(self) -> int:
        return self.memory.version

    async def answer(self, problem: Problem, arrival: int | None) -> ProblemResult:
        shown = self.memory.shown()
        self._save()
        result = await self.method.solve(problem, self.ctx, memory=self.memory.render(shown))
        return result.model_copy(update={"answered_with": self.answered_with(arrival, shown)})

    async def learn(self, problem: Problem, result: ProblemResult) -> StreamUpdate | None:
        arrival = result.answered_with.arrival if result.answered_with else 0
        added = self.memory.learn(problem.id, arrival, await self._generalised(problem, result))
        self._save()
        if not added:
            return None
        return StreamUpdate(state=self.memory.version, arrivals=arrival + 1, learned_from=(problem.id,), added=added)

    async def restore(
        self, answered: Sequence[tuple[Problem, ProblemResult]], updates: Sequence[StreamUpdate]
    ) -> tuple[str, list[StreamUpdate]]:
        made = []
        for problem, result in answered:
            for item in self.memory.items:  # the uses each answered problem counted when it arrived
                item.uses += item.id in (result.answered_with.memory if result.answered_with else ())
            update = await self.learn(problem, result)
            if update is not None:
                made.append(update)
        recorded = max((u.state for u in updates), default=0)
        note = f"shared memory rebuilt from them: version {self.memory.version}, {len(self.memory.active())} lessons"
        return note, [u for u in made if u.state > recorded]

    async def _generalised(self, problem: Problem, result: ProblemResult) -> list[str]:
        """The problem's own lessons, rewritten by the model to hold on other problems (one `reflect` call, after
        the problem's rounds; a resumed stream's replay gets it back from the cache)."""
        lessons = own_lessons(result.rounds[-1].knowledge) if result.rounds else []
        if not lessons:
            return []
        after = result.rounds[-1].round + 1
        prompt = prompts.GENERALISE.format(
            lessons="\n".join(f"- {lesson.text}" for lesson in lessons), problem=problem.statement
        )
        asked = [Message(role="user", content=prompt)]
        [completion] = await self.ctx.on(problem).sample("reflect", 1, asked, step=after, slot=MEMORY_SLOT)
        return (parse_lessons(completion.text) or [])[: self.method.options.lessons_per_round]

    def _save(self) -> None:
        if self.path is not None:
            self.path.parent.mkdir(exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(self.memory.model_dump_json(indent=2) + "\n", encoding="utf-8")
            tmp.replace(self.path)
