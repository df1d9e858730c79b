"""Which free-form replies agree: classes of equivalent answers, judged by the model, not by shared wording.

Word overlap measures wording: four paraphrases that all say Paris share few words, four templated replies that
name four different cities share most of theirs. So the classes a text vote counts (and the confidence it
reports) come from one judgement of the model (purpose `consistency`, in the ledger like USC's): it is shown
every reply, fenced and numbered as USC shows them (`judge_prompt`: escaped, hash-drawn three-digit numbers, so
no reply can address the judge or name another), and asked to group the replies that give the same answer.
Replies it puts in no group are each a class of their own. Where there is no model to ask (a TRL reward
function), or the judgement names no group, the fallback is named: identical replies after normalisation.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence

from testtime.core.records import Completion, Message, Problem
from testtime.selectors import SelectionContext

REPLY_CHARS = 20_000  # each reply shown to the judge: its last characters (a reply's conclusion is at its end)
PROMPT_CHARS = 120_000  # the judge's whole prompt; past it every shown reply is cut to its share
LABELS = range(100, 1000)  # three-digit response numbers: a reply guessing one of n hits it at n/900
RESPONSE_BLOCK = '<response number="{number}">\n{text}\n</response>'
GROUP_PROMPT = """I have generated the following responses to the question: {question}

{responses}

Group the responses that give the same answer to the question, whatever their wording; responses whose answers
contradict each other go in different groups. Write one line per group, listing its response numbers, like:
Group: 101, 245"""
_GROUP_LINE = re.compile(r"group\b[^:\n]{0,20}:([^\n]*)", re.IGNORECASE)
_NUMBER = re.compile(r"\d+")


def response_labels(question: str, texts: Sequence[str]) -> list[int]:
    """Distinct three-digit numbers for the shown replies, drawn from a hash of the question and every reply:
    the same replies get the same numbers (a replay hits the cache), and no reply can know its own number or
    another's, since each number depends on every reply, its own included."""
    digest = hashlib.sha256("\x00".join([question, *texts]).encode("utf-8", "replace")).digest()
    return random.Random(digest).sample(LABELS, len(texts))


def judge_prompt(
    template: str, question: str, texts: Sequence[str], labels: Sequence[int], excerpt: int | None
) -> tuple[str, int]:
    """The judge's prompt with each reply fenced and escaped, and how many replies were cut to fit the caps (each
    reply's, then its share of the whole prompt's, the question taking at most a quarter)."""
    asked = _escaped(question)[: PROMPT_CHARS // 4]
    share = (PROMPT_CHARS - len(template) - len(asked)) // max(len(texts), 1) - len(RESPONSE_BLOCK)
    cap = min(excerpt or REPLY_CHARS, REPLY_CHARS, share)
    shown = [_escaped(text) for text in texts]
    blocks = [RESPONSE_BLOCK.format(number=n, text=text[-cap:]) for n, text in zip(labels, shown, strict=True)]
    return template.format(question=asked, responses="\n".join(blocks)), sum(len(text) > cap for text in shown)


def _escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def read_groups(text: str, labels: Sequence[int]) -> list[int] | None:
    """Each shown reply's class from the judgement's `Group:` lines (a reply in no group, or named twice after
    its first, is a class of its own or stays in its first); None when no line names a shown reply. Bounded:
    only numbers of at most three digits are read."""
    place = {label: i for i, label in enumerate(labels)}
    classes: list[int | None] = [None] * len(labels)
    groups = 0
    for line in _GROUP_LINE.findall(text):
        members = [place[int(d)] for d in _NUMBER.findall(line) if len(d) <= 3 and int(d) in place]
        fresh = [i for i in dict.fromkeys(members) if classes[i] is None]
        if fresh:
            for i in fresh:
                classes[i] = groups
            groups += 1
    if not groups:
        return None
    for i, cls in enumerate(classes):
        if cls is None:
            classes[i] = groups
            groups += 1
    return [c for c in classes if c is not None]


async def ask_judge(problem: Problem, prompt: str, ctx: SelectionContext) -> Completion:
    """One judgement of the replies (a `consistency` call, at the plan's sampling), through the problem's calls."""
    judged = await ctx.ask("consistency", [Message(role="user", content=prompt)])
    if judged is None:
        raise RuntimeError(f"a judgement of {problem.id} needs the problem's calls, with 'consistency' declared")
    return judged


async def judged_classes(
    problem: Problem, texts: Sequence[str], ctx: SelectionContext, excerpt: int | None = None
) -> tuple[list[int] | None, str]:
    """The model's classes for `texts` (one call), or None with why (no model, a failed call, no group read)."""
    if ctx.calls is None:
        return None, "no model to judge agreement"
    labels = response_labels(problem.statement, texts)
    prompt, _ = judge_prompt(GROUP_PROMPT, problem.statement, texts, labels, excerpt)
    judged = await ask_judge(problem, prompt, ctx)
    if judged.error is not None:
        return None, f"the judgement failed: {judged.error}"
    classes = read_groups(judged.text, labels)
    return classes, "" if classes is not None else "the judgement names no group of the shown responses"
