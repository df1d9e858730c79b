"""The rollout engine: cache before backend, retries only for transient errors, errors as data, the ledger."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from testtime.core.cache import CompletionCache
from testtime.core.call_policy import RetryPolicy
from testtime.core.errors import BudgetExhausted, ModelError, TransientModelError
from testtime.core.ledger import Ledger, read_entries
from testtime.core.records import Message, SamplingParams
from testtime.core.rollout import RolloutEngine
from testtime.core.seeds import sample_seed
from testtime.models.fake import FakeModel

PROMPT = [Message(role="user", content="What is 2 + 3?")]
FAST_RETRY = RetryPolicy(max_attempts=3, base_delay_s=0.001, call_timeout_s=0.5)


def engine(model: FakeModel | None, cache: CompletionCache | None = None, **kwargs: object) -> RolloutEngine:
    return RolloutEngine(
        model,
        model_name="fake:",
        cache=cache if cache is not None else CompletionCache(None),
        ledger=Ledger(),
        retry=kwargs.pop("retry", FAST_RETRY),
        **kwargs,
    )  # type: ignore[arg-type]


def test_samples_are_cached_and_a_rerun_pays_nothing() -> None:
    cache, model = CompletionCache(None), FakeModel()
    first = engine(model, cache)
    asyncio.run(first.sample(PROMPT, 4, SamplingParams(seed=1)))
    assert model.calls == 4 and first.ledger.totals.calls == 4
    second = engine(model, cache)
    out = asyncio.run(second.sample(PROMPT, 4, SamplingParams(seed=1)))
    assert model.calls == 4  # nothing reached the backend
    assert second.ledger.totals.calls == 0 and second.ledger.totals.cache_hits == 4
    assert all(c.cached for c in out)


def test_each_sample_gets_its_own_seed() -> None:
    seen: list[int | None] = []

    def script(messages: Sequence[Message], params: SamplingParams) -> str:
        seen.append(params.seed)
        return "x"

    asyncio.run(engine(FakeModel(script)).sample(PROMPT, 5, SamplingParams(seed=7)))
    assert len(set(seen)) == 5


def test_a_second_call_of_a_problem_draws_new_samples() -> None:
    model = FakeModel()
    eng = engine(model)

    async def twice() -> list[list[str | None]]:
        first = await eng.sample(PROMPT, 2, SamplingParams(seed=1), problem_id="p")
        second = await eng.sample(PROMPT, 2, SamplingParams(seed=1), problem_id="p")
        return [[c.call for c in first], [c.call for c in second]]

    first, second = asyncio.run(twice())
    assert model.calls == 4 and eng.ledger.totals.cache_hits == 0
    assert len(set(first + second)) == 4  # four samples, four call ids: none is a copy of another


def test_first_asks_for_the_same_samples_again() -> None:
    model = FakeModel()
    eng = engine(model)

    async def again() -> tuple[list[str | None], list[str | None]]:
        drawn = await eng.sample(PROMPT, 3, SamplingParams(seed=1), problem_id="p")
        same = await eng.sample(PROMPT, 3, SamplingParams(seed=1), problem_id="p", first=0)
        return [c.call for c in drawn], [c.call for c in same]

    drawn, same = asyncio.run(again())
    assert drawn == same and model.calls == 3


def test_draws_are_counted_per_problem_and_per_call() -> None:
    seeds: list[int | None] = []

    def script(messages: Sequence[Message], params: SamplingParams) -> str:
        seeds.append(params.seed)
        return "x"

    eng = engine(FakeModel(script))

    async def calls() -> None:
        await eng.sample(PROMPT, 2, SamplingParams(seed=1), problem_id="p")
        await eng.sample(PROMPT, 2, SamplingParams(seed=1), problem_id="q")  # another problem: its own first draw
        await eng.sample(PROMPT, 2, SamplingParams(seed=2), problem_id="p")  # other params: another call
        await eng.sample(PROMPT, 2, SamplingParams(seed=1), problem_id="p", purpose="tests")

    asyncio.run(calls())
    calls_made = [(1, "p", "solve"), (1, "q", "solve"), (2, "p", "solve"), (1, "p", "tests")]
    firsts = [sample_seed(base, i, pid, purpose, "per-problem") for base, pid, purpose in calls_made for i in (0, 1)]
    assert seeds == firsts  # each of the four calls drew its indices 0 and 1


def test_a_resumed_engine_meets_the_same_draws_in_the_cache() -> None:
    cache, model = CompletionCache(None), FakeModel()

    async def two_calls(eng: RolloutEngine) -> list[str | None]:
        first = await eng.sample(PROMPT, 2, SamplingParams(seed=1), problem_id="p")
        second = await eng.sample(PROMPT, 2, SamplingParams(seed=1), problem_id="p")
        return [c.call for c in first + second]

    paid = asyncio.run(two_calls(engine(model, cache)))
    resumed = engine(None, cache)  # replay: only the cache answers
    assert asyncio.run(two_calls(resumed)) == paid
    assert resumed.ledger.totals.cache_hits == 4 and model.calls == 4


def test_a_forgotten_problem_starts_its_draws_again() -> None:
    model = FakeModel()
    eng = engine(model)
    asyncio.run(eng.sample(PROMPT, 2, SamplingParams(seed=1), problem_id="p"))
    eng.forget("p")
    asyncio.run(eng.sample(PROMPT, 2, SamplingParams(seed=1), problem_id="p"))
    assert model.calls == 2 and eng.ledger.totals.cache_hits == 2


def test_transient_errors_are_retried_then_succeed() -> None:
    model = FakeModel(fail=lambda call: TransientModelError("429", retry_after=0.001) if call <= 2 else None)
    e = engine(model)
    [completion] = asyncio.run(e.sample(PROMPT, 1, SamplingParams()))
    assert completion.error is None and "boxed{3}" in completion.text
    assert model.calls == 3 and e.ledger.totals.retries == 2 and e.ledger.totals.errors == 0


def test_permanent_errors_are_not_retried_and_come_back_as_data() -> None:
    model = FakeModel(fail=lambda call: ModelError("400 bad request"))
    e = engine(model)
    [completion] = asyncio.run(e.sample(PROMPT, 1, SamplingParams()))
    assert model.calls == 1
    assert completion.finish_reason == "error" and "400" in (completion.error or "")
    assert e.ledger.totals.errors == 1


def test_retries_are_bounded() -> None:
    model = FakeModel(fail=lambda call: TransientModelError("503"))
    [completion] = asyncio.run(engine(model).sample(PROMPT, 1, SamplingParams()))
    assert model.calls == FAST_RETRY.max_attempts
    assert completion.error is not None and "after 3 attempts" in completion.error


def test_a_hanging_call_times_out_as_a_timeout_record() -> None:
    model = FakeModel(latency_s=5.0)
    [completion] = asyncio.run(
        engine(model, retry=RetryPolicy(max_attempts=1, call_timeout_s=0.05)).sample(PROMPT, 1, SamplingParams())
    )
    assert completion.finish_reason == "timeout"


def test_errors_are_not_cached_so_a_resume_retries_them() -> None:
    cache = CompletionCache(None)
    asyncio.run(engine(FakeModel(fail=lambda call: ModelError("boom")), cache).sample(PROMPT, 1, SamplingParams()))
    assert len(cache) == 0


def test_replay_never_calls_and_reports_misses_as_errors() -> None:
    cache = CompletionCache(None)
    asyncio.run(engine(FakeModel(), cache).sample(PROMPT, 2, SamplingParams(seed=0)))
    replay = engine(None, cache)
    out = asyncio.run(replay.sample(PROMPT, 3, SamplingParams(seed=0)))
    assert [c.error is None for c in out] == [True, True, False]
    assert replay.ledger.totals.calls == 0


def test_concurrency_is_bounded() -> None:
    in_flight, peak = 0, 0

    class Probe(FakeModel):
        async def generate(self, messages, n, params):  # type: ignore[no-untyped-def]
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            await asyncio.sleep(0.01)
            in_flight -= 1
            return await super().generate(messages, n, params)

    asyncio.run(engine(Probe(), concurrency=3).sample(PROMPT, 12, SamplingParams()))
    assert peak == 3


@pytest.mark.parametrize("retry_after", [0.2, None])
def test_retry_delay_honours_retry_after(retry_after: float | None) -> None:
    delay = RetryPolicy(base_delay_s=1.0).delay(1, retry_after)
    assert delay == 0.2 if retry_after else 0.5 <= delay <= 1.0


def test_retry_after_is_parsed_safely() -> None:
    from datetime import datetime, timedelta, timezone
    from email.utils import format_datetime

    from testtime.core.call_policy import RetryPolicy, parse_retry_after

    soon = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=20), usegmt=True)
    assert parse_retry_after("2.5") == 2.5 and 15 < (parse_retry_after(soon) or 0) <= 20
    assert parse_retry_after(format_datetime(datetime(2000, 1, 1, tzinfo=timezone.utc), usegmt=True)) == 0.0
    for bad in ("nan", "inf", "-inf", "-3", "soon", "", None, "Mon, 99 Foo"):
        assert parse_retry_after(bad) is None, bad
    policy = RetryPolicy(base_delay_s=0.5, max_delay_s=30)
    assert 0 < policy.delay(1, float("nan")) <= 0.5  # a NaN that got through anyway falls back to the backoff
    assert policy.delay(1, 1e9) == 30


@pytest.mark.parametrize("provider", ["openai:mock", "litellm:openai/mock"])
@pytest.mark.parametrize("header", ["nan", "inf", "-1"])
def test_a_nonsense_retry_after_does_not_stall_the_run(
    provider: str, header: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counted, not timed: the wait the engine chose after the 429 is the backoff's, never the header's nonsense
    (an idle box's wall time would pass a busy machine's run as a stall)."""
    from tests.helpers import api_engine
    from testtime.models.mock_server import MockChatServer

    waits: list[float] = []
    delay = RetryPolicy.delay

    def counted(self: RetryPolicy, attempt: int, retry_after: float | None) -> float:
        waits.append(delay(self, attempt, retry_after))
        return waits[-1]

    monkeypatch.setattr(RetryPolicy, "delay", counted)
    with MockChatServer(faults={1: 429}, retry_after_s=header) as server:
        engine = api_engine(provider, [server.url], concurrency=1, attempts=3)
        [completion] = asyncio.run(engine.sample([Message(role="user", content="1 + 1")], 1, SamplingParams()))
    assert completion.error is None
    assert len(waits) == 1 and 0 <= waits[0] <= engine.retry.base_delay_s, waits


def test_a_stop_refusing_one_sample_waits_for_its_siblings_in_flight() -> None:
    """A signal arrives while two of four samples are in flight: the third is refused its slot, but the error
    propagates only after the second has landed in the ledger, so nothing the server charged is abandoned."""
    from testtime.core.errors import Interrupted, RunStopped

    class Slow(FakeModel):
        async def generate(self, messages: Sequence[Message], n: int, params: SamplingParams) -> list:  # type: ignore[override]
            self.started += 1
            if self.started == 1:
                stopping.request_stop(Interrupted("interrupted by SIGTERM", 15))
                await asyncio.sleep(0.01)
            else:
                await asyncio.sleep(0.3)  # still in flight when the third sample is refused
            return await super().generate(messages, n, params)

    model = Slow()
    model.started = 0
    stopping = engine(model, concurrency=2)
    with pytest.raises(RunStopped):
        asyncio.run(stopping.sample(PROMPT, 4, SamplingParams(seed=1)))
    assert stopping.ledger.totals.calls == 2  # both calls in flight landed before the stop propagated


def test_a_stop_refusing_many_calls_keeps_none_of_them_alive() -> None:
    """Every refused call raises the one stop reason the engine holds; its traceback must not gather each
    call's frames (a served request of 200,000 calls kept 600k frames, and all they referenced, after the stop)."""
    from testtime.core.errors import Interrupted, RunStopped

    stopping = engine(FakeModel(), concurrency=8)
    stopping.request_stop(Interrupted("interrupted by SIGTERM", 15))
    with pytest.raises(RunStopped) as raised:
        asyncio.run(stopping.sample(PROMPT, 2000, SamplingParams(seed=1)))
    assert stopping.ledger.totals.calls == 0
    assert stopping.stop is not None and stopping.stop.__traceback__ is None  # the engine's reason holds no frames
    frames, tb = 0, raised.value.__traceback__
    while tb is not None:
        frames, tb = frames + 1, tb.tb_next
    assert frames < 20  # the raised one, one call's
    # what was raised is the same stop: class, message and attributes
    assert isinstance(raised.value, Interrupted) and raised.value.signum == 15
    assert str(raised.value) == "interrupted by SIGTERM"


def test_a_call_cancelled_in_flight_keeps_its_ledger_line(tmp_path: Path) -> None:
    """A second Ctrl-C or a server's stop past its drain cancels calls already sent: each may have been charged,
    so each is a ledger line (an error, tokens unknown), never a call that vanished."""
    ledger = Ledger(tmp_path / "ledger.jsonl")
    engine = RolloutEngine(FakeModel(latency_s=30), model_name="fake:", cache=CompletionCache(None), ledger=ledger)

    async def go() -> None:
        task = asyncio.create_task(engine.sample([Message(role="user", content="1?")], 3, SamplingParams()))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    ledger.close()
    entries = read_entries(tmp_path / "ledger.jsonl")
    assert len(entries) == 3
    assert all(e.error and "cancelled in flight" in e.error and not e.tokens_known for e in entries)
    assert ledger.totals.calls == 3 and ledger.totals.unknown_token_calls == 3


class _Refused(FakeModel):
    """Refuses connections on the calls in `refused` (1-based), answers the others."""

    def __init__(self, refused: set[int]) -> None:
        super().__init__()
        self.refused, self.tried = refused, 0

    async def generate(self, messages: Sequence[Message], n: int, params: SamplingParams) -> list:  # type: ignore[override]
        from testtime.core.errors import Unreachable

        self.tried += 1
        if self.tried in self.refused:
            raise Unreachable("no server answered (ClientConnectorError: connection refused)")
        return await super().generate(messages, n, params)


def test_a_dead_upstream_on_the_first_call_stops_the_run_at_once() -> None:
    """Connection refused before any call was answered is a dead server, not a transient error: one try, then a
    clean stop (resumable), not six attempts a call for every call of the run."""
    from testtime.core.errors import UpstreamDown

    model = _Refused(refused=set(range(1, 100)))
    dead = engine(model, concurrency=1, retry=RetryPolicy(max_attempts=6, base_delay_s=5))
    with pytest.raises(UpstreamDown, match="no server is listening"):
        asyncio.run(dead.sample(PROMPT, 8, SamplingParams(seed=1)))
    assert model.tried == 1 and dead.ledger.totals.calls == 0  # nothing was sent, nothing paid


def test_an_upstream_that_answered_once_is_retried_when_it_refuses() -> None:
    model = _Refused(refused={2})
    alive = engine(model, concurrency=1)
    completions = asyncio.run(alive.sample(PROMPT, 2, SamplingParams(seed=1)))
    assert all(c.error is None for c in completions) and model.tried == 3 and alive.stop is None


def test_a_price_per_token_prices_the_calls_a_backend_leaves_unpriced() -> None:
    from testtime.core.call_policy import TokenPrice

    class Unpriced(FakeModel):
        async def generate(self, messages: Sequence[Message], n: int, params: SamplingParams) -> list:  # type: ignore[override]
            return [c.model_copy(update={"cost_usd": None}) for c in await super().generate(messages, n, params)]

    priced = engine(Unpriced(), price=TokenPrice(1.0, 2.0), max_cost_usd=1e-9)
    [completion] = asyncio.run(priced.sample(PROMPT, 1, SamplingParams(seed=1)))
    usage = completion.usage
    expected = (usage.prompt_tokens * 1.0 + usage.completion_tokens * 2.0) / 1e6
    assert expected > 0 and priced.ledger.totals.cost_usd == pytest.approx(expected)
    with pytest.raises(BudgetExhausted):  # the budget binds on the computed cost
        asyncio.run(priced.sample(PROMPT, 1, SamplingParams(seed=2)))


def test_a_huge_draw_builds_its_samples_a_window_at_a_time() -> None:
    """`--n 100000000` once built every pending sample before the first call (21.7 GB, the event loop deaf to
    SIGTERM): samples are built as a window of them goes out."""
    from testtime.core.rollout import DRAW_WINDOW

    drawing = engine(FakeModel(), concurrency=2)
    built, answered, ahead = [0], [0], []
    make = drawing._unit

    def counted(*args: object, **kwargs: object) -> object:
        built[0] += 1
        return make(*args, **kwargs)  # type: ignore[arg-type]

    async def generate(messages: Sequence[Message], n: int, params: SamplingParams) -> list:
        ahead.append(built[0] - answered[0])
        answered[0] += 1
        return await FakeModel().generate(messages, n, params)

    drawing._unit = counted  # type: ignore[method-assign]
    drawing.model.generate = generate  # type: ignore[method-assign,union-attr]
    completions = asyncio.run(drawing.draw(PROMPT, 3 * DRAW_WINDOW + 5, SamplingParams(seed=1), problem_id="p",
                                           purpose="solve"))  # fmt: skip
    assert len(completions) == 3 * DRAW_WINDOW + 5 and answered[0] == len(completions)
    assert max(ahead) <= DRAW_WINDOW
