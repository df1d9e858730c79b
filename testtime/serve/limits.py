"""What one client may ask of `testtime serve`, and how long a connection may take to ask it.

A request's compute is bounded by the model calls its method plans (`Plan.calls`: majority's N, TRT's
rounds × rollouts with reflection, RSA's population × steps), so `majority-1000000/…` is refused before a call
is made, whatever option or prefix spelled it. The body's size and its message count are capped before it is
parsed, and parsing runs off the event loop, so a large body never stalls other clients. A connection that
has not sent a complete request within the header timeout (slowloris), or sits idle between requests past
the idle timeout, is closed; a body that does not arrive within its timeout is a 408.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ServeLimits:
    max_calls: int = 256  # model calls a request's method plans (RSA's default 16 x 10 fits)
    max_messages: int = 1000
    max_body_mb: float = 8.0
    header_timeout_s: float = 10.0  # from connecting to a complete request's headers
    idle_timeout_s: float = 60.0  # a kept-alive connection between requests
    body_timeout_s: float = 30.0  # from the headers to the body's last byte (--body-timeout)
    code_requests: bool = False  # may a request ask for the code domain (programs run in the sandbox)?
    # a request's max_tokens without a server --max-tokens: no model's window holds more (10^12 once went upstream)
    max_request_tokens: int = 1 << 20

    @property
    def max_body_bytes(self) -> int:
        return int(self.max_body_mb * 1024 * 1024)


async def sweep_connections(server: Any, limits: ServeLimits, every_s: float = 0.5) -> None:
    """Close connections that hold the server without asking: no complete request within the header timeout
    of connecting, or none within the idle timeout of the last. Runs until cancelled.

    aiohttp has no header timeout of its own (its keep-alive timer starts only after a response); this reads
    each connection's request count and whether a request is in progress (aiohttp's RequestHandler)."""
    seen: dict[Any, tuple[int, float]] = {}  # by connection (aiohttp's handlers take no weak references)
    while True:
        now, connections = time.monotonic(), server.connections
        seen = {handler: seen[handler] for handler in connections if handler in seen}  # closed ones go
        for handler in connections:
            count = getattr(handler, "_request_count", 0)
            if getattr(handler, "_request_in_progress", False):
                seen[handler] = (count, now)
                continue
            last_count, since = seen.setdefault(handler, (count, now))
            if count != last_count:
                seen[handler] = (count, now)
                continue
            allowed = limits.header_timeout_s if count == 0 else limits.idle_timeout_s
            if now - since > allowed:
                handler.force_close()
        await asyncio.sleep(every_s)
