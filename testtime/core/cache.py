"""The completion cache: sqlite in WAL mode, one row per sample, so a rerun never pays twice.

A sample is keyed by (model, messages, sampling params incl. its own seed, sample index). Only successful
completions are stored: an error is data for the run that saw it, and a resumed run retries it.
Each put commits at once, so a run killed with SIGKILL loses at most the call in flight.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from testtime.core.records import Completion, Message, SamplingParams


def cache_key(model: str, messages: Sequence[Message], params: SamplingParams, sample_index: int) -> str:
    payload = {
        "model": model,
        "messages": [[m.role, m.content] for m in messages],
        # `logprobs` joined the params later: left out when unset, so every older run's keys still match
        "params": params.model_dump(mode="json", exclude={"logprobs"} if params.logprobs is None else None),
        "sample_index": sample_index,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class CompletionCache:
    """Key → Completion. `path=None` keeps it in memory (tests, throwaway runs)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._db = sqlite3.connect(str(path) if path else ":memory:", check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS completions (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._db.commit()

    def get(self, key: str) -> Completion | None:
        row = self._db.execute("SELECT value FROM completions WHERE key = ?", (key,)).fetchone()
        return Completion.model_validate_json(row[0]) if row else None

    def put(self, key: str, completion: Completion) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO completions (key, value) VALUES (?, ?)", (key, completion.model_dump_json())
        )
        self._db.commit()

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM completions").fetchone()[0]

    def close(self) -> None:
        self._db.close()
