"""What answers a learning endpoint's request is what its record names: the serving steps move only once the
weights they name are loaded, so a request that arrives while new weights load is answered, and named, by the
weights already serving (the bug: steps raised before the load, the old weights answering under the new name)."""

from __future__ import annotations

import asyncio
from collections import Counter
from types import SimpleNamespace

from testtime.methods.ttrl.background import BackgroundUpdates


def background_with_a_slow_load(loading: asyncio.Event) -> tuple[BackgroundUpdates, object, object]:
    base_engine, trained_engine = SimpleNamespace(model=None), SimpleNamespace(model=None)

    async def slow_load(steps: int) -> object:
        await loading.wait()
        return trained_engine

    background = BackgroundUpdates.__new__(BackgroundUpdates)  # the weights' bookkeeping alone: no model, no server
    background.base, background.serving, background.voting, background.updates = "hf:m", 0, Counter(), []
    background.versions = {0: "base", 8: "stream/update-1/ttrl/final"}
    background.engines = {0: base_engine}  # type: ignore[dict-item]
    background.online = SimpleNamespace(steps=0)  # type: ignore[assignment]
    background.files = SimpleNamespace(append_move=lambda move: None)  # type: ignore[assignment]
    background._load = slow_load  # type: ignore[method-assign]
    return background, base_engine, trained_engine


def test_a_request_arriving_while_new_weights_load_is_answered_and_named_by_the_old() -> None:
    async def scenario() -> None:
        loading = asyncio.Event()
        background, base_engine, trained_engine = background_with_a_slow_load(loading)
        moving = asyncio.create_task(background.move("8", "admin"))
        await asyncio.sleep(0)  # the move is loading the weights it asked for
        borrowed = asyncio.create_task(background.borrow())
        await asyncio.sleep(0)
        assert borrowed.done(), "a request waited for weights that were not serving yet"
        engine, steps = borrowed.result()
        assert (engine, steps, background.name(steps)) == (base_engine, 0, "hf:m")
        background.give_back(steps)
        loading.set()
        assert await moving == "hf:m+ttrl@8"
        engine, steps = await background.borrow()
        assert (engine, steps, background.name(steps)) == (trained_engine, 8, "hf:m+ttrl@8")

    asyncio.run(scenario())


def test_a_request_naming_weights_that_load_is_answered_by_them_once_loaded() -> None:
    async def scenario() -> None:
        loading = asyncio.Event()
        background, _, trained_engine = background_with_a_slow_load(loading)
        pinned = asyncio.create_task(background.borrow(8))
        await asyncio.sleep(0)
        assert not pinned.done() and background.serving == 0  # waits for its weights; serving is untouched
        loading.set()
        assert await pinned == (trained_engine, 8)

    asyncio.run(scenario())
