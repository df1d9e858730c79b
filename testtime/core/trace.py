"""The trace: every model call of a run as it happened — its messages, its response, its purpose, problem and
round — in two JSONL files a researcher can read with `jq`:

- `trace.jsonl`, one line per call (paid, cached, failed or missing in a replay), in the order they ended;
- `blobs.jsonl`, every distinct text once (`{"id", "text"}`), since prompts repeat (few-shot prefixes,
  statements, knowledge lists) and would otherwise make the trace many times the size of the run.

A line names its texts by blob id. `call` is the sample's cache key (short), which the candidates built from
it carry too, so a round's candidate leads back to the exact prompt that produced it. Resume appends;
a replay writes a trace of its own (every line a cache hit).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from testtime.core.jsonl import read_records, repair_tail
from testtime.core.records import Completion, Message

CALL_ID_LENGTH = 16


def blob_id(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class TraceLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    call: str
    time: float
    model: str
    problem_id: str = ""
    purpose: str = ""
    step: int | None = None
    sample_index: int = 0
    outcome: Literal["paid", "cached", "error", "missing"]
    messages: list[tuple[str, str]]  # (role, blob id)
    response: str | None = None  # blob id of the text; None when there is none
    finish_reason: str = "stop"
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Trace:
    """Writes the trace of a run directory (`folder=None`: keeps nothing)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self._known: set[str] = set()
        self._lines = self._blobs = None
        if folder is not None:
            lines, blobs = folder / "trace.jsonl", folder / "blobs.jsonl"
            for path in (lines, blobs):
                repair_tail(path)
            if blobs.exists():
                self._known = {json.loads(line)["id"] for line in read_records(blobs)}
            self._lines = lines.open("a", encoding="utf-8")
            self._blobs = blobs.open("a", encoding="utf-8")

    def _blob(self, text: str) -> str:
        key = blob_id(text)
        if key not in self._known and self._blobs is not None:
            self._blobs.write(json.dumps({"id": key, "text": text}, ensure_ascii=False) + "\n")
            self._blobs.flush()
            self._known.add(key)
        return key

    def record(
        self,
        *,
        call: str,
        time: float,
        model: str,
        messages: list[Message],
        completion: Completion,
        outcome: Literal["paid", "cached", "error", "missing"],
        problem_id: str,
        purpose: str,
        step: int | None,
        sample_index: int,
    ) -> None:
        if self._lines is None:
            return
        line = TraceLine(
            call=call,
            time=time,
            model=model,
            problem_id=problem_id,
            purpose=purpose,
            step=step,
            sample_index=sample_index,
            outcome=outcome,
            messages=[(m.role, self._blob(m.content)) for m in messages],
            response=self._blob(completion.text) if completion.text else None,
            finish_reason=completion.finish_reason,
            error=completion.error,
            prompt_tokens=completion.usage.prompt_tokens,
            completion_tokens=completion.usage.completion_tokens,
        )
        self._lines.write(line.model_dump_json(exclude_defaults=True) + "\n")
        self._lines.flush()

    def close(self) -> None:
        for handle in (self._lines, self._blobs):
            if handle is not None:
                handle.close()
        self._lines = self._blobs = None


def read_trace(folder: Path) -> tuple[list[TraceLine], dict[str, str]]:
    """The calls of a run directory and its texts by blob id (a run without a trace has neither)."""
    lines: list[TraceLine] = []
    blobs: dict[str, str] = {}
    for name, sink in (("trace.jsonl", "lines"), ("blobs.jsonl", "blobs")):
        path = folder / name
        if not path.exists():
            continue
        for raw in read_records(path):
            try:
                value = json.loads(raw)
            except json.JSONDecodeError:
                continue  # a torn last line
            if sink == "lines":
                lines.append(TraceLine.model_validate(value))
            else:
                blobs[value["id"]] = value["text"]
    return lines, blobs
