"""How a run reports progress: to an observer the caller passes in (the CLI's progress bar, a test's list,
later a server's log). The run never imports a display."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from testtime.core.ledger import LedgerTotals
from testtime.core.results import ResultRecord


@dataclass(frozen=True)
class ProgressPlan:
    problems: int | None  # in the run; None: not known ahead (a stream on standard input)
    done: int  # already finished before this process started
    totals: LedgerTotals  # live: the ledger's running totals (calls, tokens, cost)
    planned_calls: int | None = None  # calls the remaining problems cost by construction, if known
    rounds: int | None = None  # rounds (TRT) or steps (RSA) over all problems, if the method has them


class RunObserver(Protocol):
    def start(self, plan: ProgressPlan) -> None: ...

    def problem_done(self, record: ResultRecord, rounds_done: int) -> None: ...

    def tick(self, rounds_done: int) -> None:
        """Called twice a second while calls are in flight (a TRT problem finishes only after all its rounds)."""

    def stop(self) -> None: ...

    def note(self, text: str) -> None:
        """Something a user should read while the run goes on (a rejected line of a stream)."""


class QuietObserver:
    """Reports nothing (tests, `--quiet`, library use)."""

    def start(self, plan: ProgressPlan) -> None:
        return None

    def problem_done(self, record: ResultRecord, rounds_done: int) -> None:
        return None

    def tick(self, rounds_done: int) -> None:
        return None

    def stop(self) -> None:
        return None

    def note(self, text: str) -> None:
        return None
