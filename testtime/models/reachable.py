"""Whether a server is listening at each `--api-base`: `serve` checks its upstream before it starts, so a dead
one is one line at start, not a 502 after the first client waited through every retry."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

CONNECT_TIMEOUT_S = 3.0


def unreachable(urls: list[str], timeout_s: float = CONNECT_TIMEOUT_S) -> dict[str, str]:
    """Each URL no TCP connection reached, with why (refused, no such host, no answer within the timeout)."""
    found = {}
    for url in urls:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            with socket.create_connection((parts.hostname or "", port), timeout=timeout_s):
                pass
        except OSError as exc:
            found[url] = f"{type(exc).__name__}: {exc.strerror or exc}"
    return found
