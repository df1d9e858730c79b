"""The compute ledger: every model call (and later sandbox run and training step) as one JSONL line.

Compute-matched comparisons read these totals, never a guess (architecture invariant 3). A resumed run
loads the lines already written, so its totals cover the whole run, not just the last process.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from testtime.core.jsonl import read_records, repair_tail


class LedgerEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["model_call", "sandbox", "train_step"] = "model_call"
    time: float = 0.0
    model: str = ""
    problem_id: str = ""
    # the kind of call it was: an open string a method declares in its plan (solve, reflect, a plugin's own);
    # the built-in kinds are named beside their methods, and "selection" / "ttrl_update" / "ttrl_reward" mark
    # sandbox seconds and training steps
    purpose: str = "solve"
    sample_index: int = 0
    step: int | None = None  # the round (TRT) or aggregation step (RSA) a call belongs to
    cached: bool = False
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens_known: bool = True  # False: the server's counts were unusable (the 0s above are unknown, not free)
    truncated: bool = False  # the answer stopped at max_tokens (cut reasoning, a lost answer)
    latency_s: float = 0.0
    cost_usd: float | None = None
    error: str | None = None
    seconds: float = 0.0  # sandbox or training wall time
    train_tokens: int = 0
    flops: float | None = None  # training steps: an estimate (6·params·tokens and friends), never measured
    # --n-per-request: the samples one request returned (one prefill); the request's tokens and cost are on
    # its first sample's line, the others' are 0 (latency is the request's on each). None: a request of its own.
    request_samples: int | None = None


@dataclass
class LedgerTotals:
    calls: int = 0  # model calls that reached a backend (paid), cache hits excluded
    cache_hits: int = 0
    errors: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cost_known: bool = True  # False once any paid call had no known price
    unknown_token_calls: int = 0  # paid calls whose token counts the server did not give usably
    truncated_calls: int = 0  # model calls (paid or cached) whose answer stopped at max_tokens
    model_seconds: float = 0.0
    sandbox_seconds: float = 0.0
    train_steps: int = 0
    train_tokens: int = 0
    train_flops: float = 0.0
    train_seconds: float = 0.0

    @classmethod
    def of(cls, entries: Iterable[LedgerEntry]) -> LedgerTotals:
        """The totals of ledger lines already read (a finished or still-running run's `read_entries`)."""
        totals = cls()
        for entry in entries:
            totals.add(entry)
        return totals

    def add(self, e: LedgerEntry) -> None:
        if e.kind == "sandbox":
            self.sandbox_seconds += e.seconds
            return
        if e.kind == "train_step":
            self.train_steps += 1
            self.train_tokens += e.train_tokens
            self.train_flops += e.flops or 0.0
            self.train_seconds += e.seconds
            return
        self.truncated_calls += e.truncated
        if e.cached:
            self.cache_hits += 1
            return
        self.calls += 1
        self.errors += e.error is not None
        self.retries += max(0, e.attempts - 1)
        self.prompt_tokens += e.prompt_tokens
        self.completion_tokens += e.completion_tokens
        self.unknown_token_calls += not e.tokens_known
        self.model_seconds += e.latency_s
        if e.cost_usd is None:
            self.cost_known = False
        else:
            self.cost_usd += e.cost_usd

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> dict[str, float | int | bool]:
        return {**asdict(self), "tokens": self.tokens}


class Ledger:
    """Appends entries to `path` (flushed per line) and keeps running totals. `path=None`: memory only."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.totals = LedgerTotals()
        self._watched: dict[str, LedgerTotals] = {}
        self._file = None
        if path is not None:
            repair_tail(path)  # a line torn by a kill -9 mid-write: that call is re-made and re-logged
            if path.exists():
                for line in read_records(path):
                    try:
                        self.totals.add(LedgerEntry.model_validate_json(line))
                    except ValueError:
                        continue
            self._file = path.open("a", encoding="utf-8")

    def record(self, entry: LedgerEntry) -> None:
        if not entry.time:
            entry.time = time.time()
        self.totals.add(entry)
        watched = self._watched.get(entry.problem_id)
        if watched is not None:
            watched.add(entry)
        if self._file is not None:
            # compact, but every line names its kind of entry and of call, the defaults ("model_call", "solve")
            # included: a reader grepping for '"purpose":"solve"' finds every solve call
            line = {
                "kind": entry.kind,
                "purpose": entry.purpose,
                **entry.model_dump(mode="json", exclude_defaults=True),
            }
            self._file.write(json.dumps(line, separators=(",", ":")) + "\n")
            self._file.flush()

    def watch(self, problem_id: str) -> LedgerTotals:
        """Running totals of one problem's entries from now on (a served request's usage); `unwatch` ends them."""
        totals = self._watched[problem_id] = LedgerTotals()
        return totals

    def unwatch(self, problem_id: str) -> None:
        self._watched.pop(problem_id, None)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def read_entries(path: Path) -> list[LedgerEntry]:
    """All well-formed entries of a ledger file (for audits and tests)."""
    entries = []
    for line in read_records(path):
        try:
            entries.append(LedgerEntry.model_validate(json.loads(line)))
        except ValueError:
            continue
    return entries
