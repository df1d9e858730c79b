"""A fleet of OpenAI-compatible servers: which server a call goes to, and which are out after failing.

Two routings (`--routing`):
- `affinity` (the default): every call of one problem — its samples, rounds, steps — goes to one server, the
  first in the problem's rendezvous-hash order (highest random weight: each problem ranks the servers by
  sha256(problem, server), so adding or losing a server moves only the problems it ranked first). A server's
  prefix cache (vLLM's automatic prefix caching keeps a prompt's KV within one server) then serves a problem's
  later calls. Bounded loads at placement: a server already carrying more than 1.25× its share of the calls
  in flight is saturated, and a problem arriving then is placed on the next server in its order (Mirrokni et
  al., "Consistent Hashing with Bounded Loads"); once placed, a problem stays until its server fails.
- `least-loaded`: each call to the server with the fewest calls in flight (what fleets did before).
Either way a server that fails is taken out for a while (doubling each time it fails again) and the call moves
on at once; one that is out is asked only when every server is out.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

Routing = Literal["affinity", "least-loaded"]
ROUTINGS: tuple[Routing, ...] = ("affinity", "least-loaded")
LOAD_BOUND = 1.25  # a server may carry this multiple of its fair share of the calls in flight
OUT_FIRST_S = 2.0  # how long a server that failed stays out, doubling on each further failure
OUT_MAX_S = 60.0
MAX_PLACED = 100_000  # problems whose server is remembered


@dataclass
class Server:
    """One base URL of the fleet: its client (made in the event loop that uses it), load and health."""

    url: str
    make_client: Callable[[str], Any]
    in_flight: int = 0
    failures: int = 0
    out_until: float = 0.0
    takes_n: bool = True  # answers `n` choices in one request; False once it answered fewer than asked
    _client: Any = None
    _loop: asyncio.AbstractEventLoop | None = None

    def client(self) -> Any:
        # aiohttp sessions belong to one event loop; a later asyncio.run gets a client of its own.
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client, self._loop = self.make_client(self.url), loop
        return self._client

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None and self._loop is asyncio.get_running_loop():
            await client.close()

    def available(self, now: float) -> bool:
        return now >= self.out_until

    def failed(self, now: float) -> None:
        self.failures += 1
        self.out_until = now + min(OUT_MAX_S, OUT_FIRST_S * 2 ** (self.failures - 1))

    def answered(self) -> None:
        self.failures, self.out_until = 0, 0.0


def rank(key: str, servers: list[Server]) -> list[Server]:
    """The servers in `key`'s rendezvous order (the same for every call of that key, whatever the load)."""
    return sorted(servers, key=lambda s: hashlib.sha256(f"{key}\x00{s.url}".encode()).digest(), reverse=True)


@dataclass
class Fleet:
    """The servers and where each problem was placed: a problem stays on its server (its prefix cache) until
    that server fails; saturation only steers where a problem is placed first."""

    routing: Routing = "affinity"
    servers: list[Server] = field(default_factory=list)
    placed: OrderedDict[str, Server] = field(default_factory=OrderedDict)

    def order(self, key: str | None) -> list[Server]:
        """Servers to try for one call, each at most once: those in service first (the problem's own server,
        then its rendezvous order with bounded load; or by load), then those taken out, soonest back first (a
        lone server, or a fleet all out, is still asked)."""
        now = time.monotonic()
        serving = [s for s in self.servers if s.available(now)]
        out = sorted((s for s in self.servers if not s.available(now)), key=lambda s: s.out_until)
        if self.routing == "least-loaded" or key is None or len(serving) < 2:
            return sorted(serving, key=lambda s: s.in_flight) + out
        ranked = rank(key, serving)
        home = self.placed.get(key)
        if home is None or home not in serving:
            capacity = math.ceil(LOAD_BOUND * (sum(s.in_flight for s in serving) + 1) / len(serving))
            home = next((s for s in ranked if s.in_flight < capacity), ranked[0])
            self._place(key, home)
        return [home, *(s for s in ranked if s is not home), *out]

    def _place(self, key: str, server: Server) -> None:
        self.placed[key] = server
        self.placed.move_to_end(key)
        while len(self.placed) > MAX_PLACED:  # the oldest problems are long done
            self.placed.popitem(last=False)
