"""Errors a user can cause or fix, and the model-call errors the rollout engine knows how to treat.

The CLI prints a `UserError` as one line and exits non-zero; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import errno
import sqlite3
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError

    from testtime.core.records import Usage


class UserError(Exception):
    """Bad input from the user (unknown name, unreadable file, malformed config): one clear line."""


class PlanError(RuntimeError):
    """A method did what its plan did not declare (a kind of model call): its bug, not the user's; the record
    would no longer say what ran, so the run stops."""


class ModelError(Exception):
    """A model call failed in a way retrying will not fix (bad request, auth, unknown model)."""


class TransientModelError(ModelError):
    """A model call failed in a way that may pass on retry (429, 5xx, timeout, connection reset)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Unreachable(TransientModelError):
    """No server could be connected to (connection refused, no such host): nothing was sent, nothing paid."""


class MalformedAnswer(TransientModelError):
    """The server answered 200 with something that is not a chat completion: paid for, and unusable. Retried a
    bounded number of times; every such attempt is a ledger line of its own, with the tokens it reported."""

    def __init__(self, message: str, usage: Usage | None = None, cost_usd: float | None = None) -> None:
        super().__init__(message)
        self.usage = usage
        self.cost_usd = cost_usd


class RunStopped(Exception):
    """A run stops before it is done, cleanly: no new call starts, the calls in flight land, finished problems
    are saved, and `--resume` continues."""

    def again(self) -> RunStopped:
        """The same stop as a new exception (its class, message and attributes; no traceback, no __init__ run):
        one reason raised by many calls would otherwise carry every raiser's frames on one traceback."""
        fresh = type(self).__new__(type(self), *self.args)
        fresh.__dict__.update(self.__dict__)
        return fresh


class BudgetExhausted(RunStopped):
    """A run reached its --max-cost or --max-tokens-total: it stops cleanly and can be resumed with more."""

    def __init__(self, kind: str, spent: float, limit: float) -> None:
        self.kind, self.limit = kind, limit
        super().__init__(f"{kind} budget reached: {self._amount(spent)} of {self._amount(limit)}")

    def _amount(self, value: float) -> str:
        return f"${value:.4f}" if self.kind == "cost" else f"{int(value):,}"

    def final(self, spent: float) -> str:
        """The stop as reported once the calls in flight when it fired have landed: the final spend."""
        return (
            f"{self.kind} budget reached: {self._amount(spent)} spent of {self._amount(self.limit)} "
            "(calls already in flight when it was reached finished and are counted)"
        )


class UpstreamDown(RunStopped):
    """The run's first calls found no server listening: a dead upstream is not a transient error, so the run stops
    within seconds (resumable once the server is up) instead of retrying every call to the end."""


class Interrupted(RunStopped):
    """Ctrl-C, SIGTERM or SIGHUP: the run stops as for a spent budget, and the process then exits 128 + signal."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = signum


def first_error(exc: ValidationError) -> tuple[str, str]:
    """The first problem pydantic found, as (dotted field path, message): one line for the user."""
    first = exc.errors()[0]
    return ".".join(str(p) for p in first["loc"]), first["msg"].removeprefix("Value error, ")


STORAGE_ERRNOS = (errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EIO, errno.EFBIG)


def storage_failure(exc: BaseException) -> bool:
    """The disk, not the program: full, read-only, over quota, past a file-size limit, or failing. One line, never
    a traceback (a run stops resumable; a server answers 507 and goes on)."""
    if isinstance(exc, sqlite3.OperationalError):
        return any(words in str(exc) for words in ("full", "readonly", "disk I/O", "unable to open"))
    return isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS
