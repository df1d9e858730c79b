"""Running synchronous work that may itself start an event loop, from code that may already be in one."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def off_loop(work: Callable[[], T]) -> T:
    """`work` here, or in a thread of its own when this thread already runs an event loop (a notebook does,
    and `asyncio.run` refuses to start inside one)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return work()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(work).result()
