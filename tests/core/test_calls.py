"""The call handle: a problem's calls bound to its problem, its kind and the plan's sampling; and the engine that
holds every call of a running method to the same rules, whoever makes it."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from pathlib import Path

import pytest

from testtime.core.cache import CompletionCache
from testtime.core.calls import Calls
from testtime.core.declared import declared_calls
from testtime.core.errors import PlanError
from testtime.core.ledger import Ledger, LedgerEntry, read_entries
from testtime.core.records import Message, SamplingParams
from testtime.core.rollout import RolloutEngine
from testtime.core.seeds import problem_rng, slot_seed
from testtime.models.fake import FakeModel

PROMPT = [Message(role="user", content="What is 2 + 3?")]
WARM = SamplingParams(temperature=0.9, max_tokens=64, seed=7)
GREEDY = SamplingParams(temperature=0.0, max_tokens=16, seed=7)


def engine_seeing(sent: list[tuple[str, SamplingParams]], ledger: Path | None = None) -> RolloutEngine:
    """An engine whose model notes what each call sent; its ledger in `ledger` (a file) where given."""

    def script(messages: Sequence[Message], params: SamplingParams) -> str:
        sent.append((messages[-1].content, params))
        return "\\boxed{5}"

    return RolloutEngine(FakeModel(script), model_name="fake:", cache=CompletionCache(None), ledger=Ledger(ledger))


def lines(engine: RolloutEngine) -> list[LedgerEntry]:
    assert engine.ledger.path is not None
    engine.ledger.close()
    return read_entries(engine.ledger.path) if engine.ledger.path.exists() else []


def test_a_call_sends_its_kinds_sampling_and_names_its_problem_and_kind(tmp_path: Path) -> None:
    sent: list[tuple[str, SamplingParams]] = []
    engine = engine_seeing(sent, tmp_path / "ledger.jsonl")
    calls = Calls(engine, {"solve": WARM, "critique": GREEDY}, "p1", prompt=PROMPT, seed=7)

    async def main() -> None:
        await calls.sample("solve", 2)
        await calls.sample("critique", 1, [Message(role="user", content="Check it.")], step=3)

    asyncio.run(main())
    assert [(text, p.temperature, p.max_tokens) for text, p in sent] == [
        ("What is 2 + 3?", 0.9, 64),
        ("What is 2 + 3?", 0.9, 64),
        ("Check it.", 0.0, 16),
    ]
    assert [(e.problem_id, e.purpose, e.step) for e in lines(engine)] == [
        ("p1", "solve", None),
        ("p1", "solve", None),
        ("p1", "critique", 3),
    ]


def test_an_undeclared_kind_is_one_line_before_anything_is_paid(tmp_path: Path) -> None:
    sent: list[tuple[str, SamplingParams]] = []
    engine = engine_seeing(sent, tmp_path / "ledger.jsonl")
    calls = Calls(engine, {"solve": WARM}, "p1", prompt=PROMPT, owner="shout")
    with pytest.raises(PlanError, match="shout makes 'critique' calls; its plan declares solve"):
        asyncio.run(calls.sample("critique"))
    assert sent == [] and lines(engine) == []


def test_a_handle_is_always_tied_to_a_problem() -> None:
    with pytest.raises(PlanError, match="tied to no problem"):
        Calls(engine_seeing([]), {"solve": WARM}, "")


def test_a_slot_seeds_a_call_as_before_the_handle() -> None:
    """Same formula as the release before (`ctx.params_for(step, slot, kind)`): cache keys do not move."""
    calls = Calls(engine_seeing([]), {"reflect": WARM}, "p1", seed=7)
    assert calls.params("reflect", step=2, slot=1000).seed == (7 * 1_000_003 + 2 * 1009 + 1000) % 2**31
    assert calls.params("reflect", step=2, slot=1000).seed == slot_seed(7, 2, 1000)
    assert calls.params("reflect").seed == 7  # no slot: the plan's own seed
    assert calls.params("reflect", step=2, slot=1000).temperature == 0.9  # only the seed is the step's


def test_a_problems_generator_is_the_one_methods_used_before() -> None:
    calls = Calls(engine_seeing([]), {"solve": WARM}, "p1", seed=7)
    assert calls.rng(3).random() == random.Random("7-p1-3").random()
    assert problem_rng(7, "p1").random() == random.Random("7-p1").random()


def test_with_engine_keeps_problem_kind_and_sampling(tmp_path: Path) -> None:
    sent: list[tuple[str, SamplingParams]] = []
    trained = engine_seeing(sent, tmp_path / "ledger.jsonl")
    calls = Calls(engine_seeing([]), {"solve": WARM}, "p1", prompt=PROMPT).with_engine(trained)
    asyncio.run(calls.sample("solve"))
    assert len(sent) == 1 and sent[0][1].temperature == 0.9 and lines(trained)[0].problem_id == "p1"


def test_while_a_method_runs_the_engine_refuses_sampling_its_plan_does_not_record() -> None:
    """The contract before the handle: params and kind given apart. A call whose sampling differs from its
    kind's in the plan is refused before it is sent (the manifest would record what was never sent); a seed of
    its own is allowed (a step's or slot's)."""
    sent: list[tuple[str, SamplingParams]] = []
    engine = engine_seeing(sent)

    async def main() -> None:
        with declared_calls({"solve": WARM, "reflect": GREEDY}):
            with pytest.raises(PlanError, match=r"'reflect' call sending temperature 0\.9 \(the plan records 0\.0\)"):
                await engine.sample(PROMPT, 1, WARM, problem_id="p1", purpose="reflect")
            reseeded = GREEDY.model_copy(update={"seed": 1234})
            await engine.sample(PROMPT, 1, reseeded, problem_id="p1", purpose="reflect")

    asyncio.run(main())
    assert [p.temperature for _, p in sent] == [0.0]


def test_while_a_method_runs_a_call_tied_to_no_problem_is_refused(tmp_path: Path) -> None:
    sent: list[tuple[str, SamplingParams]] = []
    engine = engine_seeing(sent, tmp_path / "ledger.jsonl")

    async def main() -> None:
        with declared_calls({"solve": WARM}):
            await engine.sample(PROMPT, 1, WARM)

    with pytest.raises(PlanError, match="tied to no problem"):
        asyncio.run(main())
    assert sent == [] and lines(engine) == []


def test_a_call_made_on_the_engine_itself_is_reported_once_per_call() -> None:
    heard: list[str] = []
    engine = engine_seeing([])

    async def main() -> None:
        with declared_calls({"solve": WARM}, direct=heard.append):
            await engine.sample(PROMPT, 1, WARM, problem_id="p1")
            await Calls(engine, {"solve": WARM}, "p1", prompt=PROMPT).sample("solve")  # a handle's: not reported

    asyncio.run(main())
    assert heard == ["solve"]


def _refused_unpaid(call: object, *, calls: int | None = 2, ceiling: int = 1000) -> str:
    """What the engine says of `call(handle)` inside a method whose plan declares `calls` a problem; nothing may
    reach the model or the ledger."""
    sent: list[tuple[str, SamplingParams]] = []
    engine = engine_seeing(sent)
    handle = Calls(engine, {"solve": WARM}, "p1", prompt=PROMPT, seed=7)

    async def main() -> None:
        with declared_calls({"solve": WARM}, calls=calls, ceiling=ceiling):
            await call(handle)  # type: ignore[operator]

    with pytest.raises(PlanError) as refused:
        asyncio.run(main())
    assert sent == [] and engine.ledger.totals.calls == 0
    return str(refused.value)


def test_a_call_past_the_plans_calls_is_refused_before_it_is_paid() -> None:
    said = _refused_unpaid(lambda calls: calls.sample("solve", 10**9))
    assert "asking for 1,000,000,000 samples" in said and "the 2 model calls its plan declares a problem" in said


def test_a_plan_without_calls_is_bounded_by_the_runs_ceiling() -> None:
    said = _refused_unpaid(lambda calls: calls.sample("solve", 5000), calls=None, ceiling=1000)
    assert "ceiling of 1,000 calls a problem (--max-planned-calls)" in said


def test_the_plans_calls_bound_a_problems_calls_together_not_each_alone() -> None:
    sent: list[tuple[str, SamplingParams]] = []
    engine = engine_seeing(sent)
    calls = Calls(engine, {"solve": WARM}, "p1", prompt=PROMPT, seed=7)

    async def main() -> None:
        with declared_calls({"solve": WARM}, calls=3):
            await calls.sample("solve", 2)
            await calls.sample("solve", 2)

    with pytest.raises(PlanError, match=r"asking for 2 samples \(2 asked before\)"):
        asyncio.run(main())
    assert len(sent) == 2  # the first call, within the plan, was answered; the second was not sent
    engine.forget("p1")  # the problem answered: a served request of that id starts afresh (two from the cache)
    with declared_calls({"solve": WARM}, calls=3):
        asyncio.run(calls.sample("solve", 3))
    assert len(sent) == 3


@pytest.mark.parametrize(
    ("n", "messages", "words"),
    [
        (0, None, "n=0"),
        (-1, None, "n=-1"),
        (1.5, None, "n=1.5"),
        ("2", None, "n='2'"),
        (True, None, "n=True"),
        (1, [], "a call with no messages"),
        (1, "What is 2 + 3?", "a call with no messages"),
        (1, [{"role": "user", "content": "hi"}], "messages hold a dict"),
    ],
)
def test_a_malformed_count_or_messages_is_one_line_before_anything_is_sent(
    n: object, messages: object, words: str
) -> None:
    said = _refused_unpaid(lambda calls: calls.sample("solve", n, messages))  # type: ignore[arg-type]
    assert words in said and "\n" not in said


def test_a_malformed_call_is_refused_outside_a_method_too() -> None:
    sent: list[tuple[str, SamplingParams]] = []
    engine = engine_seeing(sent)
    with pytest.raises(PlanError, match="n=0"):
        asyncio.run(engine.sample(PROMPT, 0, WARM, problem_id="p1"))
    assert sent == []
