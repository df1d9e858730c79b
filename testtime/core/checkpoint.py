"""Per-problem round checkpoints (`rounds.jsonl` in the run directory) for multi-round methods.

Each finished round appends one line with the method's state after it, so a killed run resumes at the last
finished round of each problem; the completion cache makes any half-finished round free to redo.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from testtime.core.jsonl import read_records, repair_tail


class Draws(Protocol):
    """How far each call of a problem has drawn (the engine's counters): what a resume must continue from."""

    def draws(self, problem_id: str) -> dict[str, int]: ...

    def restore_draws(self, problem_id: str, draws: dict[str, int]) -> None: ...


class RoundCheckpoints:
    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._engine: Draws | None = None
        self._last: dict[str, dict[str, Any]] = {}
        self._all: dict[str, list[dict[str, Any]]] = {}
        if path is not None and path.exists():
            repair_tail(path)
            for line in read_records(path):
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line torn by a kill -9: that round is redone (from the cache)
                self._remember(entry)

    def _remember(self, entry: dict[str, Any]) -> None:
        self._last[entry["problem_id"]] = entry
        self._all.setdefault(entry["problem_id"], []).append(entry)

    def track(self, engine: Draws) -> None:
        """Keep `engine`'s draw counters with each checkpoint, and give them back when a method resumes from one:
        a method that skips the calls of its finished rounds then draws its next samples where the killed run
        would have (once, a plugin's round 2 got round 1's cached samples back)."""
        self._engine = engine

    def last(self, problem_id: str) -> dict[str, Any] | None:
        """The problem's last finished round (None: none); the engine then continues its draws from there."""
        entry = self._last.get(problem_id)
        if entry is not None and self._engine is not None and isinstance(entry.get("draws"), dict):
            self._engine.restore_draws(problem_id, entry["draws"])
        return entry

    def rounds(self, problem_id: str) -> list[dict[str, Any]]:
        return list(self._all.get(problem_id, []))

    def append(self, problem_id: str, round_: int, payload: dict[str, Any]) -> None:
        entry = {"problem_id": problem_id, "round": round_, **payload}
        if self._engine is not None:
            entry["draws"] = self._engine.draws(problem_id)
        self._remember(entry)
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(entry, ensure_ascii=False) + "\n")

    def forget(self, problem_id: str, from_round: int) -> None:
        """Drop a problem's rounds from `from_round` on (a resume that asks again for failed samples redoes them)."""
        kept = [e for e in self._all.get(problem_id, []) if e["round"] < from_round]
        self._all[problem_id] = kept
        if kept:
            self._last[problem_id] = kept[-1]
        else:
            self._last.pop(problem_id, None)
        if self.path is not None and self.path.exists():
            entries = [e for pid in self._all for e in self._all[pid]]
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries), encoding="utf-8")
            tmp.replace(self.path)

    def finished_rounds(self) -> int:
        """Rounds (t >= 1) finished across every problem: what a progress bar counts."""
        return sum(1 for entries in self._all.values() for e in entries if e["round"] >= 1)
