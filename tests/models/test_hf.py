"""The transformers backend on the embedded model: n samples of one prompt share its prefill, and what they
generate is what each would get alone (greedy: the same tokens; the accounting: every sample its own prompt)."""

from __future__ import annotations

import asyncio

import pytest

from testtime.core.records import Message, SamplingParams
from testtime.models.batching import BatchRow
from testtime.models.hf import HFModel, embedded_model_dir

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model() -> HFModel:
    pytest.importorskip("transformers")
    built = HFModel(str(embedded_model_dir("smollm2-135m")), name="hf:smollm2-135m")
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
