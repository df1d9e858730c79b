"""What one model call may cost and how it is retried: `--price` for calls a backend leaves unpriced, the retry
policy (attempts, backoff with jitter, the per-attempt timeout) and a server's `Retry-After` read safely. The
rollout engine (`core/rollout.py`) applies them, the one place calls are retried."""

from __future__ import annotations

import email.utils
import math
import random
from dataclasses import dataclass
from datetime import datetime, timezone

from testtime.core.records import Usage


@dataclass(frozen=True)
class TokenPrice:
    """`--price`: USD per million prompt and completion tokens, for the calls whose cost the backend does not
    know (a remote server, an unpriced litellm model), so `--max-cost` binds and the summary's cost is a figure."""

    prompt_per_mtok: float
    completion_per_mtok: float

    def cost(self, usage: Usage) -> float | None:
        if not usage.known:
            return None
        return (usage.prompt_tokens * self.prompt_per_mtok + usage.completion_tokens * self.completion_per_mtok) / 1e6


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 6
    malformed_attempts: int = 2  # a server that answers garbage once, paid, rarely does better the sixth time
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    call_timeout_s: float = 600.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None and math.isfinite(retry_after) and retry_after >= 0:
            return min(retry_after, self.max_delay_s)
        backoff = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
        return backoff * (0.5 + random.random() / 2)  # jitter so concurrent retries do not stampede


def parse_retry_after(value: object) -> float | None:
    """A `Retry-After` header as seconds to wait: a number of seconds or an HTTP date; anything else (NaN,
    infinity, a negative number, garbage) is None, and the backoff decides."""
    if value is None:
        return None
    text = str(value).strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return None
        seconds = (when - datetime.now(timezone.utc)).total_seconds()
        return max(0.0, seconds) if math.isfinite(seconds) else None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None
