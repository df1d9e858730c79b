"""Token statistics from one forward pass equal what the model's distribution was while it generated: the
chosen tokens' log-probabilities, entropy and self-certainty, on a tiny random model, for completions of
different lengths in one chunk (right padding must not leak into a shorter row)."""

from __future__ import annotations

import math

import pytest

from testtime.models.confidence import completion_stats
from testtime.models.hf import HFModel
from testtime.models.prefill import through_end


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_stats_from_a_forward_pass_equal_those_at_generation(temperature: float, random_model) -> None:
    """At the temperature the samples were drawn at (TTRL's rollouts use 0.6 for non-Math models): the
    distribution is softmax(logits / T), and the statistics must be of that one."""
    torch = pytest.importorskip("torch")
    built = HFModel(str(random_model), name="hf:tiny-random")
    built.load()
    model, tokenizer = built._model, built._tokenizer
    question = [{"role": "user", "content": "What is 12 + 30? Answer in one word."}]
    text = tokenizer.apply_chat_template(question, add_generation_prompt=True, tokenize=False)
    prompt = tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
    torch.manual_seed(3)
    with torch.inference_mode():
        out = model.generate(
            input_ids=prompt.repeat(3, 1),
            attention_mask=torch.ones(3, prompt.shape[1], dtype=torch.long),
            do_sample=True,
            temperature=temperature,
            top_k=0,
            max_new_tokens=14,
            output_logits=True,
            return_dict_in_generate=True,
            pad_token_id=tokenizer.pad_token_id,
        )
    rows = [through_end(r, built._end_ids) for r in out.sequences[:, prompt.shape[1] :].tolist()]
    stats = completion_stats(model, prompt[0].tolist(), rows, temperature)
    for i, row in enumerate(rows):
        # `output_logits` are the raw logits: the sampled distribution is theirs divided by T
        logp = [torch.log_softmax(out.logits[t][i].float() / temperature, -1) for t in range(len(row))]
        chosen = sum(float(lp[token]) for lp, token in zip(logp, row, strict=True)) / len(row)
        entropy = sum(float(-(lp.exp() * lp).sum()) for lp in logp) / len(row)
        certainty = sum(-math.log(lp.shape[-1]) - float(lp.mean()) for lp in logp) / len(row)
        assert stats[i].tokens == len(row) and stats[i].temperature == temperature
        assert stats[i].logprob_mean == pytest.approx(chosen, abs=2e-3)
        assert stats[i].entropy_mean == pytest.approx(entropy, abs=2e-3)
        assert stats[i].self_certainty == pytest.approx(certainty, abs=2e-3)
    assert completion_stats(model, prompt[0].tolist(), [[]])[0].logprob_mean is None  # nothing generated
