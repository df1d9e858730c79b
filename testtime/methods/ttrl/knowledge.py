"""TRT's knowledge inside TTRL (`--method-opt knowledge=trt`): after each rollout step, one TRT reflection per
prompt over that step's vote — a sample of the class it chose beside one of each class it rejected, TRT's own
reflection prompt — whose "don't" lessons join that prompt's knowledge list; the list is carried in the prompt's
later rollouts (TRT's knowledge section appended to its last user turn), never in the evaluation prompt, so the
before/after evaluation stays the paper's and comparable with a run without it.

The reflection is asked of the run's engine (the base weights offline; a server's serving weights), a kind of
call of its own (`knowledge`); each step records the lists asked, the reflections parsed and the lessons entered
(`steps.jsonl`'s `knowledge`), and the run's summary their totals in TRT's knowledge health line. GRPO trains on
the prompts as the rollouts saw them (the rollout returns their token ids), lessons included.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from testtime.core.records import Message, Problem
from testtime.core.results import TTRLKnowledge
from testtime.knowledge import KnowledgeList
from testtime.methods.trt import prompts
from testtime.methods.trt.parsing import parse_reflection

SHOWN_CHARS = 800  # each sample's ending shown to the reflection
LESSONS_PER_STEP = 1  # as TRT's reference: one lesson a round
KNOWLEDGE_SLOT = 3000  # the reflection's seed slot in its step (TRT's own slots are 0, 999, 1000, 2000)


def prompt_key(messages: Sequence[Any]) -> str:
    """A rollout prompt as TRL hands it over (chat messages, dicts): the key its problem is found by."""
    return json.dumps([{"role": m["role"], "content": m["content"]} for m in messages], sort_keys=True)


class RolloutKnowledge:
    """Each prompt's knowledge list, and the step's reflections that grow them."""

    def __init__(
        self,
        problems: Sequence[Problem],
        prompt: Callable[[Problem], list[dict[str, str]]],
        ask: Callable[[Problem, list[Message], int], Awaitable[str]],
    ) -> None:
        """`prompt`: a problem's rollout prompt as chat dicts; `ask(problem, messages, step)`: one reflection."""
        self.by_prompt = {prompt_key(prompt(p)): p for p in problems}
        self.lists: dict[str, KnowledgeList] = {p.id: KnowledgeList() for p in problems}
        self.ask = ask

    def augment(self, messages: Sequence[Any]) -> list[dict[str, str]]:
        """The rollout prompt with its problem's lessons in its last user turn (unchanged while it has none)."""
        chat = [{"role": m["role"], "content": m["content"]} for m in messages]
        problem = self.by_prompt.get(prompt_key(messages))
        lessons = self.lists[problem.id].render() if problem is not None else ""
        if not lessons:
            return chat
        last = max(i for i, m in enumerate(chat) if m["role"] == "user")
        section = prompts.KNOWLEDGE.format(items=lessons)
        chat[last] = {"role": "user", "content": f"{chat[last]['content']}\n\n{section}"}
        return chat

    async def reflect(self, problem: Problem, texts: Sequence[str], chosen: Sequence[int], step: int) -> TTRLKnowledge:
        """One reflection over a prompt's vote: `texts` every sample's text, `chosen` the chosen class's places
        (empty: the vote abstained, nothing to compare). Its lessons join the prompt's list."""
        if not chosen or len(chosen) == len(texts):
            return TTRLKnowledge()  # nothing was rejected: no mistake to learn from
        others = [i for i in range(len(texts)) if i not in set(chosen)][:3]
        shown = lambda i: f"[attempt {i}]\n{texts[i][-SHOWN_CHARS:]}"  # noqa: E731 - a one-line formatter
        knowledge = self.lists[problem.id]
        message = prompts.REFLECT.format(
            problem=problem.statement,
            selected=shown(chosen[0]),
            others="\n\n".join(shown(i) for i in others),
            evidence="",
            knowledge=knowledge.render() or "(none yet)",
            k=1,
        )
        reply = await self.ask(problem, [Message(role="user", content=message)], step)
        reflection = parse_reflection(reply)
        if reflection.deactivate is not None:
            knowledge.deactivate(reflection.deactivate)
        entered = [knowledge.add(insight, step) for insight in reflection.insights[:LESSONS_PER_STEP]]
        return TTRLKnowledge(asked=1, parsed=int(reflection.parsed), entered=sum(e is not None for e in entered))
