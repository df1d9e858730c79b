"""`fake:` — a scripted model for tests and dry runs, registered like any other provider.

Specs: `fake:` or `fake:echo` (answers `\\boxed{<last number in the prompt>}`), `fake:const:<text>`
(always `<text>`), `fake:file:<path>` (a JSON list of responses, cycled), `fake:fail:<message>` (every call
fails, not retryable). Append `,latency=<seconds>` to any of them to simulate a slow model. From Python, pass
`script=callable(messages, params) -> str` for full control, plus optional latency and failures.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from testtime.core.errors import ModelError, UserError
from testtime.core.model import LanguageModel
from testtime.core.records import Completion, Message, SamplingParams, Usage
from testtime.models import MODELS

Script = Callable[[Sequence[Message], SamplingParams], str]


def _echo(messages: Sequence[Message], params: SamplingParams) -> str:
    numbers = re.findall(r"-?\d+", messages[-1].content)
    return f"The answer is \\boxed{{{numbers[-1] if numbers else 0}}}."


class FakeModel(LanguageModel):
    """Answers from a script; counts calls so tests can check what reached the 'backend'."""

    def __init__(
        self,
        script: Script = _echo,
        *,
        name: str = "fake:",
        latency_s: float = 0.0,
        fail: Callable[[int], Exception | None] | None = None,
    ) -> None:
        self.name = name
        self.script = script
        self.latency_s = latency_s
        self.fail = fail
        self.calls = 0

    async def generate(self, messages: Sequence[Message], n: int, params: SamplingParams) -> list[Completion]:
        self.calls += 1
        if self.fail is not None and (error := self.fail(self.calls)) is not None:
            raise error
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        prompt_tokens = sum(len(m.content.split()) for m in messages)
        out = []
        for _ in range(n):
            text = self.script(messages, params)
            out.append(
                Completion(
                    text=text,
                    usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=len(text.split())),
                    latency_s=self.latency_s,
                    cost_usd=0.0,
                )
            )
        return out


def _from_file(path: str) -> Script:
    try:
        responses = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"fake:file: cannot read a JSON list of responses from {path}: {exc}") from None
    if not isinstance(responses, list) or not responses or not all(isinstance(r, str) for r in responses):
        raise UserError(f"fake:file: {path} must hold a non-empty JSON list of strings")
    counter = itertools.count()
    return lambda messages, params: responses[next(counter) % len(responses)]


@MODELS.register("fake", help="scripted model for tests: fake:echo, fake:const:TEXT, fake:file:PATH")
def build_fake(rest: str, **_: Any) -> LanguageModel:
    body, latency = rest, 0.0
    if (option := re.search(r",latency=([0-9.]+)$", rest)) is not None:
        body, latency = rest[: option.start()], float(option.group(1))
    kind, _, arg = body.partition(":")
    name = f"fake:{rest}"
    if kind in ("", "echo"):
        return FakeModel(name=name, latency_s=latency)
    if kind == "const":
        return FakeModel(lambda messages, params: arg, name=name, latency_s=latency)
    if kind == "file":
        return FakeModel(_from_file(arg), name=name, latency_s=latency)
    if kind == "fail":
        return FakeModel(name=name, latency_s=latency, fail=lambda call: ModelError(arg or "scripted failure"))
    raise UserError(f"unknown fake model '{rest}'; use fake:echo, fake:const:TEXT, fake:file:PATH or fake:fail:MSG")
