"""Fleets that keep a problem together (`--routing affinity`, the default for `openai:`) and a problem's samples
in one request (`--n-per-request`): every call of a problem on one server, the load still spread by problem,
failover and saturation down the problem's own order, `n` choices split back into per-sample cache and ledger
lines, and a server that ignores `n`."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from testtime.core.cache import CompletionCache
from testtime.core.call_policy import RetryPolicy
from testtime.core.ledger import Ledger
from testtime.core.records import Message, SamplingParams
from testtime.core.rollout import RolloutEngine
from testtime.models import resolve_model
from testtime.models.fleet import Fleet, Server, rank
from testtime.models.mock_server import MockChatServer


def engine_for(urls: list[str], *, routing: str = "affinity", n_per_request: bool = False) -> RolloutEngine:
    model = resolve_model("openai:mock", api_base=urls, routing=routing, request_timeout_s=5.0)
    return RolloutEngine(
        model,
        model_name=model.name,
        cache=CompletionCache(None),
        ledger=Ledger(),
        concurrency=8,
        retry=RetryPolicy(max_attempts=2, base_delay_s=0.01),
        n_per_request=n_per_request,
    )


def solve(engine: RolloutEngine, problems: int, n: int, rounds: int = 1, seed: int = 0) -> None:
    """Each problem: `rounds` calls of `n` samples, each round a new prompt (as TRT's rounds are)."""

    async def one(i: int) -> None:
        for r in range(rounds):
            prompt = [Message(role="user", content=f"problem {i}, round {r}: {i} + {r}?")]
            await engine.sample(prompt, n, SamplingParams(max_tokens=8, seed=seed), problem_id=f"p{i}", step=r)

    async def main() -> None:
        try:
            await asyncio.gather(*(one(i) for i in range(problems)))
        finally:
            assert engine.model is not None
            await engine.model.aclose()

    asyncio.run(main())


def prompts_by_server(servers: list[MockChatServer]) -> dict[str, set[int]]:
    """problem id → the servers (by position) that received any of its calls."""
    seen: dict[str, set[int]] = {}
    for position, server in enumerate(servers):
        for body in server.bodies:
            problem = body["messages"][-1]["content"].split(",")[0].removeprefix("problem ")
            seen.setdefault(f"p{problem}", set()).add(position)
    return seen


def test_every_call_of_a_problem_goes_to_one_server_and_problems_spread() -> None:
    with MockChatServer(latency_s=0.01) as a, MockChatServer(latency_s=0.01) as b, MockChatServer(latency_s=0.01) as c:
        solve(engine_for([a.url, b.url, c.url]), problems=24, n=4, rounds=3)
        servers = [a, b, c]
    placed = prompts_by_server(servers)
    assert len(placed) == 24 and all(len(where) == 1 for where in placed.values()), placed
    per_server = Counter(next(iter(where)) for where in placed.values())
    assert len(per_server) == 3 and min(per_server.values()) >= 3, per_server  # hashing spreads the problems


def test_least_loaded_scatters_a_problem_over_servers() -> None:
    with MockChatServer(latency_s=0.01) as a, MockChatServer(latency_s=0.01) as b, MockChatServer(latency_s=0.01) as c:
        solve(engine_for([a.url, b.url, c.url], routing="least-loaded"), problems=12, n=4, rounds=3)
        placed = prompts_by_server([a, b, c])
    assert sum(len(where) > 1 for where in placed.values()) >= 6  # what affinity prevents


def servers(count: int) -> list[Server]:
    return [Server(f"http://10.0.0.{i}:8000/v1", lambda url: None) for i in range(count)]


def test_losing_a_server_moves_only_the_problems_it_ranked_first() -> None:
    fleet = servers(4)
    keys = [f"problem-{i}" for i in range(400)]
    before = {k: rank(k, fleet)[0].url for k in keys}
    lost = fleet[2]
    after = {k: rank(k, [s for s in fleet if s is not lost])[0].url for k in keys}
    moved = {k for k in keys if before[k] != after[k]}
    assert moved == {k for k in keys if before[k] == lost.url}
    assert 60 <= len(moved) <= 140  # about a quarter of them


def test_a_problem_arriving_at_a_saturated_server_is_placed_on_the_next_and_stays() -> None:
    fleet = Fleet("affinity", servers(3))
    first, second, third = rank("new", fleet.servers)
    first.in_flight = 10  # far above its share of the 10 calls in flight over 3 servers (bound 1.25×)
    assert fleet.order("new") == [second, first, third]
    first.in_flight = 0
    assert fleet.order("new")[0] is second  # placed: it stays where its prefix cache is
    calm = Fleet("affinity", servers(3))
    for server in calm.servers:
        server.in_flight = 2  # an even load: every server within its bound
    assert calm.order("calm")[0] is rank("calm", calm.servers)[0]  # the problem's own first choice


def test_a_failed_server_loses_its_problems_to_the_next_in_their_order() -> None:
    fleet = Fleet("affinity", servers(3))
    first, second, _ = rank("p", fleet.servers)
    assert fleet.order("p")[0] is first
    first.failed(now=time.monotonic())
    assert fleet.order("p")[0] is second and fleet.order("p")[-1] is first  # out: asked last
    first.answered()  # back, but the problem has moved on: its prefix now lives on the second server
    assert fleet.order("p")[0] is second


def test_a_failing_server_hands_its_problems_to_the_next_in_their_order() -> None:
    with MockChatServer(fault=500) as broken, MockChatServer(latency_s=0.01) as b, MockChatServer() as c:
        engine = engine_for([broken.url, b.url, c.url])
        solve(engine, problems=12, n=2, rounds=2)
        assert broken.completed == 0 and b.completed + c.completed == 48
        assert broken.requests <= 4, broken.requests  # out after failing, not asked for every call
    assert engine.ledger.totals.errors == 0 and engine.ledger.totals.retries == 0


def test_n_per_request_sends_a_problems_samples_in_one_request_with_per_sample_records() -> None:
    with MockChatServer() as server:
        engine = engine_for([server.url], n_per_request=True)
        solve(engine, problems=5, n=4)
        assert server.requests == 5 and server.choices == 20
        assert all(body["n"] == 4 for body in server.bodies)
        prompt_tokens = server.prefill_tokens
    entries = engine.ledger
    totals = entries.totals
    assert totals.calls == 20  # a ledger line (and a cache key) per sample
    assert totals.prompt_tokens == prompt_tokens  # each prompt's prefill counted once, as the server did it
    # Again, as a resume does (the problems answered anew): every sample from the cache, nothing sent.
    with MockChatServer() as again:
        engine.model = resolve_model("openai:mock", api_base=[again.url])
        for i in range(5):
            engine.forget(f"p{i}")
        solve(engine, problems=5, n=4)
        assert again.requests == 0
    assert engine.ledger.totals.cache_hits == 20


def test_n_per_request_asks_only_for_the_samples_the_cache_lacks(tmp_path: Path) -> None:
    cache = CompletionCache(tmp_path / "cache.sqlite")
    with MockChatServer() as server:
        engine = engine_for([server.url], n_per_request=True)
        engine.cache = cache
        solve(engine, problems=1, n=2)
        solve_more = engine_for([server.url], n_per_request=True)
        solve_more.cache = cache
        solve(solve_more, problems=1, n=5)  # samples 0-1 cached, 2-4 asked in one request
        assert [body.get("n") for body in server.bodies] == [2, 3]
    assert solve_more.ledger.totals.cache_hits == 2 and solve_more.ledger.totals.calls == 3


def test_a_server_that_ignores_n_still_gives_every_sample() -> None:
    with MockChatServer(takes_n=False) as server:
        engine = engine_for([server.url], n_per_request=True)
        solve(engine, problems=1, n=4)
        # The first request found out (one choice for four): the other three were asked one a request, and
        # every later request asks for a sample at a time.
        assert server.choices == 4 and server.requests == 4
        solve(engine, problems=3, n=4, seed=1)
        assert server.choices == 16 and server.requests == 16
        assert sum(1 for body in server.bodies if body.get("n")) == 1
    assert engine.ledger.totals.errors == 0 and engine.ledger.totals.calls == 16


def test_affinity_keeps_a_problem_on_its_server_with_n_per_request() -> None:
    with MockChatServer() as a, MockChatServer() as b:
        solve(engine_for([a.url, b.url], n_per_request=True), problems=16, n=4, rounds=3)
        placed = prompts_by_server([a, b])
        assert a.requests + b.requests == 48
    assert all(len(where) == 1 for where in placed.values())


RUN = ("run", "--method", "majority", "--bench", "arith", "--limit", "3", "--n", "4", "--quiet")


def test_the_flags_are_checked_and_recorded(testtime_cli: Callable, tmp_path: Path) -> None:
    refused = testtime_cli(*RUN, "--model", "fake:echo", "--n-per-request", "--out", str(tmp_path / "a"))
    assert refused.returncode != 0 and "--n-per-request" in refused.stderr and "Traceback" not in refused.stderr
    bogus = testtime_cli(*RUN, "--model", "fake:echo", "--routing", "random", "--out", str(tmp_path / "b"))
    assert bogus.returncode != 0 and "--routing" in bogus.stderr and "Traceback" not in bogus.stderr
    lite = (
        "--model",
        "litellm:openai/mock",
        "--api-base",
        "http://127.0.0.1:1/v1",
        "--api-base",
        "http://127.0.0.1:2/v1",
    )
    litellm = testtime_cli(*RUN, *lite, "--routing", "affinity", "--out", str(tmp_path / "c"))
    assert litellm.returncode != 0 and "openai:<model>" in litellm.stderr
    with MockChatServer() as a, MockChatServer() as b:
        out = tmp_path / "d"
        fleet = ("--model", "openai:mock", "--api-base", a.url, "--api-base", b.url)
        done = testtime_cli(*RUN, *fleet, "--n-per-request", "--out", str(out))
        assert done.returncode == 0, done.stderr
        assert a.requests + b.requests == 3  # one request a problem
    import json

    manifest = json.loads((out / "config.json").read_text())
    assert manifest["run"]["n_per_request"] is True and manifest["model"]["routing"] == "affinity"
    lines = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    assert len(lines) == 12 and all(line["request_samples"] == 4 for line in lines)


@pytest.mark.parametrize("routing", ["affinity", "least-loaded"])
def test_a_lone_server_is_used_whatever_the_routing(routing: str) -> None:
    with MockChatServer() as server:
        solve(engine_for([server.url], routing=routing), problems=3, n=2)
        assert server.completed == 6
