"""The transformers backend, on a tiny random model (what is compared is two computations of one model): n
samples of one prompt share its prefill, and what they generate is what each would get alone (greedy: the
same tokens; the accounting: every sample its own prompt)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from testtime.core.records import Message, SamplingParams
from testtime.models.batching import BatchRow
from testtime.models.hf import HFModel

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model(random_model: Path) -> HFModel:
    pytest.importorskip("transformers")
    built = HFModel(str(random_model), name="hf:tiny-random")
    built.load()
    return built


def _rows(prompts: list[tuple[str, int]], params: SamplingParams) -> list[BatchRow]:
    loop = asyncio.new_event_loop()
    try:
        return [BatchRow([Message(role="user", content=text)], n, params, loop.create_future()) for text, n in prompts]
    finally:
        loop.close()


def test_samples_sharing_a_prefill_match_samples_generated_alone(model: HFModel) -> None:
    greedy = SamplingParams(temperature=0.0, max_tokens=16)
    long = "What is 37 + 48? Think about the tens first, then the ones, and box the answer."
    shared = model._run_batch(_rows([(long, 3), ("What is 2 + 2?", 2)], greedy))
    alone = model._run_batch(_rows([(long, 1)] * 3 + [("What is 2 + 2?", 1)] * 2, greedy))
    texts = [[c.text for c in group] for group in shared]
    assert texts == [[alone[0][0].text] * 3, [alone[3][0].text] * 2]
    assert [c.usage.prompt_tokens for g in shared for c in g] == [a[0].usage.prompt_tokens for a in alone]
    assert all(c.usage.completion_tokens > 0 for g in shared for c in g)


def test_sampled_rows_of_one_prompt_differ(model: HFModel) -> None:
    sampled = SamplingParams(temperature=1.0, max_tokens=16, seed=1)
    [group] = model._run_batch(_rows([("Name a colour and a number.", 6)], sampled))
    assert len({c.text for c in group}) > 1  # one cache copied six times, yet six independent samples


def test_one_sample_requests_of_one_prompt_share_its_prefill_and_keep_their_order(model: HFModel, monkeypatch) -> None:
    """The rollout engine sends one request per sample; requests of one prompt, interleaved with another's,
    are one prefill (timed in perf/hf_prefill.py) and each gets back its own sample, in order."""
    import testtime.models.hf as hf

    counts = []
    shared = hf.generate_shared
    monkeypatch.setattr(
        hf, "generate_shared", lambda m, i, a, c, **o: counts.append(c.tolist()) or shared(m, i, a, c, **o)
    )
    greedy = SamplingParams(temperature=0.0, max_tokens=12)
    a, b = "What is 37 + 48?", "Name a colour."
    rows = _rows([(a, 1), (b, 1), (a, 2), (b, 1)], greedy)
    result = model._run_batch(rows)
    assert counts == [[3, 2]]  # two prompts, not four rows
    assert [len(group) for group in result] == [1, 1, 2, 1]
    alone = {text: model._run_batch(_rows([(text, 1)], greedy))[0][0].text for text in (a, b)}
    assert [c.text for c in result[0] + result[2]] == [alone[a]] * 3
    assert [c.text for c in result[1] + result[3]] == [alone[b]] * 2


def test_a_greedy_answer_shares_its_samples_batch_and_prefill(model: HFModel, monkeypatch) -> None:
    """TTRL's evaluation asks a prompt's k samples and its greedy answer: one batch, one prefill, and each row
    what it would be alone (the greedy answer greedy, each seeded sample its own)."""
    import testtime.models.hf as hf

    counts = []
    shared = hf.generate_shared
    monkeypatch.setattr(
        hf, "generate_shared", lambda m, i, a, c, **o: counts.append(c.tolist()) or shared(m, i, a, c, **o)
    )
    prompt = "What is 37 + 48?"
    greedy = SamplingParams(temperature=0.0, max_tokens=12)
    sampled = [SamplingParams(temperature=t, top_p=0.95, max_tokens=12, seed=s) for t, s in ((0.6, 1), (1.2, 2))]
    assert len({hf._sampling_group(p) for p in [greedy, *sampled]}) == 1
    unseeded = SamplingParams(temperature=0.6, max_tokens=12)
    assert hf._sampling_group(unseeded) != hf._sampling_group(greedy)
    assert hf._sampling_group(greedy.model_copy(update={"logprobs": 0})) != hf._sampling_group(greedy)
    mixed = model._run_batch(
        _rows([(prompt, 1)], sampled[0]) + _rows([(prompt, 1)], greedy) + _rows([(prompt, 1)], sampled[1])
    )
    assert counts == [[3]]
    alone = [model._run_batch(_rows([(prompt, 1)], p))[0][0].text for p in (sampled[0], greedy, sampled[1])]
    assert [group[0].text for group in mixed] == alone


def test_a_prompt_asked_again_takes_its_prefill_from_the_store_and_generates_the_same(model: HFModel) -> None:
    """A vote drawn in waves asks its prompt again in batches of other prompts: the second ask finds its cache in
    the store (no prefill) and generates what a fresh prefill would, at another padding, greedy and seeded."""
    a, b, c = "What is 37 + 48? Box the answer.", "Name a colour.", "Count to three, slowly, and then stop."
    for params in (
        SamplingParams(temperature=0.0, max_tokens=12),
        SamplingParams(temperature=1.0, max_tokens=12, seed=3),
    ):
        model._prompts.clear()
        first = model._run_batch(_rows([(a, 2), (b, 1)], params))
        hits = model._prompts.hits
        again = model._run_batch(_rows([(c, 1), (a, 2), (b, 1)], params))  # c is longer: a and b padded further
        assert model._prompts.hits == hits + 2
        model._prompts.clear()
        fresh = model._run_batch(_rows([(c, 1), (a, 2), (b, 1)], params))
        assert [[x.text for x in g] for g in again] == [[x.text for x in g] for g in fresh]
        assert [x.text for x in first[0]] == [x.text for x in again[1]]


def test_generation_never_runs_past_the_models_context(tmp_path: Path, monkeypatch) -> None:
    """A budget far beyond the context (TRT's default on a small model) stops where the positions end."""
    from tests.tiny_model import build_random_model

    model = HFModel(str(build_random_model(tmp_path, eos_boost=0.0)), name="hf:endless")  # never ends a turn
    model.load()
    monkeypatch.setattr(model._model.config, "max_position_embeddings", 64)
    prompt = "Write a long story about a dragon who learns to count."
    [[completion]] = model._run_batch(_rows([(prompt, 1)], SamplingParams(temperature=0.0, max_tokens=10**6)))
    assert completion.usage.prompt_tokens + completion.usage.completion_tokens == 64
    assert completion.finish_reason == "length" and completion.usage.completion_tokens > 0
