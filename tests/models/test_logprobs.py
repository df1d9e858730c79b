"""Token log-probabilities from the backends (`--logprobs`): each sample's statistics as a server reports them
(top-k, renormalised) and as the `hf:` backend computes them (its full distribution, equal to the logits
`generate` produced); malformed server log-probs are "not measured", never a crash; asking changes the cache key
only when asked; a backend without them is refused in one line."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math

import pytest

from tests.helpers import api_engine
from testtime.core.cache import cache_key
from testtime.core.errors import UserError
from testtime.core.records import Message, SamplingParams
from testtime.models.api import served_token_stats
from testtime.models.confidence import top_stats
from testtime.models.mock_server import ALTERNATIVES, MockChatServer
from testtime.models.vllm_engine import engine_token_stats
from testtime.run.build import build_model
from testtime.run.settings import RunSettings

PROMPT = [Message(role="user", content="What is 4 + 5?")]


def _expected(k: int) -> tuple[float, float, float]:
    """(chosen log-prob, entropy, self-certainty) of one mock token with k alternatives, renormalised."""
    top = ALTERNATIVES[:k]
    p = [v / sum(top) for v in top]
    return math.log(0.6), -sum(q * math.log(q) for q in p), -math.log(k) - sum(math.log(q) for q in p) / k


def test_top_stats_on_known_values() -> None:
    _, entropy, certainty = _expected(3)
    row = [math.log(v) for v in ALTERNATIVES[:3]]
    stats = top_stats([math.log(0.6), math.log(0.3)], [row, row], 3)
    assert stats.tokens == 2 and stats.top_k == 3
    assert stats.logprob_mean == pytest.approx((math.log(0.6) + math.log(0.3)) / 2)
    assert stats.entropy_mean == pytest.approx(entropy) and stats.self_certainty == pytest.approx(certainty)
    # a uniform top-k is the least certain: self-certainty 0, entropy log k
    flat = top_stats([math.log(0.25)], [[math.log(0.25)] * 4], 4)
    assert flat.self_certainty == pytest.approx(0.0, abs=1e-12) and flat.entropy_mean == pytest.approx(math.log(4))


def test_without_alternatives_only_the_chosen_log_prob_is_measured() -> None:
    stats = top_stats([-0.5, -1.5], [[], []], 0)
    assert stats.logprob_mean == pytest.approx(-1.0)
    assert stats.entropy_mean is None and stats.self_certainty is None  # null: not measured, never 0
    short = top_stats([-0.5, -1.5], [[-0.5, -1.0], []], 2)  # a position without alternatives would skew a mean
    assert short.entropy_mean is None and short.logprob_mean == pytest.approx(-1.0)
    assert top_stats([], [], 5).tokens == 0 and top_stats([], [], 5).logprob_mean is None


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "logprobs",
        {"content": None},
        {"content": "x"},
        {"content": [{"logprob": "-0.1", "top_logprobs": []}]},
        {"content": [{"logprob": float("nan"), "top_logprobs": []}]},
        {"content": [{"logprob": 0.5, "top_logprobs": []}]},  # a probability above 1
        {"content": [{"logprob": -0.1, "top_logprobs": [{"logprob": True}]}]},
        {"content": [{"logprob": -0.1}]},
        {"content": [7]},
    ],
)
def test_malformed_server_log_probs_are_not_measured(raw: object) -> None:
    assert served_token_stats(raw, 3) is None


@pytest.mark.parametrize("provider", ["openai:mock", "litellm:openai/mock"])
def test_servers_are_asked_and_their_log_probs_recorded(provider: str) -> None:
    chosen, entropy, certainty = _expected(3)
    with MockChatServer() as server:
        engine = api_engine(provider, [server.url], concurrency=2, attempts=2)
        engine.logprobs = 3

        async def main() -> list:
            try:
                asked = await engine.sample(PROMPT, 2, SamplingParams(max_tokens=16))
                engine.logprobs = None
                return asked + await engine.sample(PROMPT, 1, SamplingParams(max_tokens=16))
            finally:
                await engine.model.aclose()

        out = asyncio.run(main())
    asked, plain = out[:2], out[2]
    assert all(b.get("logprobs") is True and b.get("top_logprobs") == 3 for b in server.bodies[:2])
    assert "logprobs" not in server.bodies[2] and "top_logprobs" not in server.bodies[2]
    for completion in asked:
        stats = completion.token_stats
        assert stats is not None and stats.top_k == 3 and stats.tokens == len(completion.text.split())
        assert stats.logprob_mean == pytest.approx(chosen)
        assert stats.entropy_mean == pytest.approx(entropy) and stats.self_certainty == pytest.approx(certainty)
    assert plain.token_stats is None


def test_a_server_that_ignores_the_request_leaves_them_unmeasured() -> None:
    body = {
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "\\boxed{9}"}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }
    with MockChatServer(fault=json.dumps(body).encode()) as server:
        engine = api_engine("openai:mock", [server.url], concurrency=1, attempts=1)
        engine.logprobs = 5
        [completion] = asyncio.run(engine.sample(PROMPT, 1, SamplingParams(max_tokens=16)))
    assert completion.error is None and completion.text == "\\boxed{9}" and completion.token_stats is None


def test_vllm_engine_log_probs_count_only_the_ranked_alternatives() -> None:
    from types import SimpleNamespace as NS

    def lp(value: float) -> NS:
        return NS(logprob=math.log(value))

    # token 9 was drawn outside the top 2 at the second position: reported, but not an alternative
    output = NS(token_ids=[5, 9], logprobs=[{5: lp(0.6), 6: lp(0.3)}, {5: lp(0.6), 6: lp(0.3), 9: lp(0.01)}])
    stats = engine_token_stats(output, 2)
    assert stats is not None and stats.top_k == 2
    assert stats.logprob_mean == pytest.approx((math.log(0.6) + math.log(0.01)) / 2)
    p = [2 / 3, 1 / 3]
    assert stats.entropy_mean == pytest.approx(-sum(q * math.log(q) for q in p))
    assert engine_token_stats(NS(token_ids=[5], logprobs=None), 2) is None


def test_asking_changes_a_samples_cache_key_only_when_asked() -> None:
    params = SamplingParams(temperature=0.7, max_tokens=8, seed=3)
    # the key as every earlier version computed it, before `logprobs` existed
    legacy = {
        "model": "m",
        "messages": [["user", "What is 4 + 5?"]],
        "params": {"temperature": 0.7, "top_p": 1.0, "max_tokens": 8, "seed": 3, "stop": []},
        "sample_index": 0,
    }
    assert cache_key("m", PROMPT, params, 0) == hashlib.sha256(json.dumps(legacy, sort_keys=True).encode()).hexdigest()
    asked = cache_key("m", PROMPT, params.model_copy(update={"logprobs": 5}), 0)
    assert asked != cache_key("m", PROMPT, params, 0)
    assert asked != cache_key("m", PROMPT, params.model_copy(update={"logprobs": 0}), 0)


def test_a_backend_without_log_probs_is_refused_in_one_line() -> None:
    settings = RunSettings(method="majority", bench="arith", model="fake:echo", logprobs=2)
    with pytest.raises(UserError, match="fake:echo gives no token log-probabilities"):
        build_model(settings)
    assert build_model(settings.model_copy(update={"logprobs": None})).name == "fake:echo"


@pytest.mark.slow
def test_hf_statistics_equal_the_logits_generate_produced(random_model) -> None:
    torch = pytest.importorskip("torch")
    from testtime.models.batching import BatchRow
    from testtime.models.hf import HFModel
    from testtime.models.prefill import through_end

    model = HFModel(str(random_model), name="hf:tiny-random")
    model.load()
    questions = ["What is 37 + 48? Box the answer.", "What is 2 + 2?"]
    greedy = SamplingParams(temperature=0.0, max_tokens=12, logprobs=0)
    loop = asyncio.new_event_loop()
    rows = [BatchRow([Message(role="user", content=q)], 2, greedy, loop.create_future()) for q in questions]
    loop.close()
    batched = model._run_batch(rows)  # two prompts of different lengths, two samples each: padding, shared prefill
    tok = model._tokenizer
    for question, group in zip(questions, batched, strict=True):
        messages = [{"role": "user", "content": question}]
        text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        prompt = tok(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
        with torch.inference_mode():
            out = model._model.generate(
                input_ids=prompt,
                attention_mask=torch.ones_like(prompt),
                do_sample=False,
                max_new_tokens=12,
                output_logits=True,
                return_dict_in_generate=True,
                pad_token_id=tok.pad_token_id,
            )
        row = through_end(out.sequences[0, prompt.shape[1] :].tolist(), model._end_ids)
        logp = [torch.log_softmax(out.logits[t][0].float(), -1) for t in range(len(row))]
        chosen = sum(float(lp[token]) for lp, token in zip(logp, row, strict=True)) / len(row)
        entropy = sum(float(-(lp.exp() * lp).sum()) for lp in logp) / len(row)
        certainty = sum(-math.log(lp.shape[-1]) - float(lp.mean()) for lp in logp) / len(row)
        for completion in group:
            stats = completion.token_stats
            assert stats is not None and stats.top_k is None and stats.tokens == len(row)
            assert stats.logprob_mean == pytest.approx(chosen, abs=2e-3)
            assert stats.entropy_mean == pytest.approx(entropy, abs=2e-3)
            assert stats.self_certainty == pytest.approx(certainty, abs=2e-3)


def test_a_run_records_each_candidates_statistics_and_resumes_from_its_cache(testtime_cli, tmp_path) -> None:
    out = tmp_path / "run"
    run = ["run", "--method", "majority", "--bench", "arith", "--limit", "2", "--n", "3", "--quiet"]
    with MockChatServer(faults={2: 400}) as server:  # one sample fails; the resume asks for it again
        asked = ["--model", "openai:mock", "--api-base", server.url, "--logprobs", "4", "--out", str(out)]
        done = testtime_cli(*run, *asked)
        assert done.returncode == 0, done.stderr
        again = testtime_cli("run", "--resume", str(out), "--quiet")
        assert again.returncode == 0, again.stderr
        # its problem's two other samples come from the cache, asked under the same key: one call more, not three
        assert server.requests == 7
    assert json.loads((out / "config.json").read_text())["run"]["logprobs"] == 4
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    stats = [c["token_stats"] for r in records for c in r["candidates"]]
    assert len(stats) == 6 and all(s["top_k"] == 4 and s["tokens"] > 0 for s in stats)
    assert all(s["logprob_mean"] == pytest.approx(math.log(0.6)) for s in stats)
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert [p["logprob_mean"] == pytest.approx(math.log(0.6)) for p in predictions] == [True, True]
    from testtime.experiments.runs import load_runs

    frame = load_runs(out)
    assert frame["logprob_mean"].dtype == "float64" and frame["logprob_mean"].tolist() == pytest.approx(
        [math.log(0.6)] * 2
    )


def test_a_predictions_log_prob_is_its_answers_samples_and_null_unless_asked(testtime_cli, tmp_path) -> None:
    answers = iter(["\\boxed{1}", "\\boxed{1}", "\\boxed{2}"])
    token_p = {"\\boxed{1}": 0.6, "\\boxed{2}": 0.1}  # one word, one token: the answer's own log-prob
    with MockChatServer(reply=lambda messages: next(answers), token_p=token_p.__getitem__) as server:
        asked = ["--model", "openai:mock", "--api-base", server.url, "--n", "3", "--limit", "1", "--quiet"]
        done = testtime_cli("run", "--method", "majority", *asked, "--logprobs", "2", "--out", str(tmp_path / "a"))
    assert done.returncode == 0, done.stderr
    [record] = [json.loads(line) for line in (tmp_path / "a" / "results.jsonl").read_text().splitlines()]
    assert sorted(c["answer"] for c in record["candidates"]) == ["1", "1", "2"]
    [prediction] = [json.loads(line) for line in (tmp_path / "a" / "predictions.jsonl").read_text().splitlines()]
    # the majority class's samples only: log 0.6, never averaged with the "2" sample's log 0.1
    assert prediction["prediction"] == "1" and prediction["logprob_mean"] == pytest.approx(math.log(0.6))
    done = testtime_cli("run", "--method", "majority", "--model", "fake:echo", "--limit", "1", "--quiet",
                        "--out", str(tmp_path / "b"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "b" / "predictions.jsonl").read_text())["logprob_mean"] is None
