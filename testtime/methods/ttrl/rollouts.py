"""TTRL's rollouts under TRL: N_vote samples per prompt, N_train of them trained, the rest only voting.

On transformers, `shared_rollouts` is TRL's `rollout_func`: all N_vote samples of every prompt in one batch, each
prompt's prefill computed once (TRL's own generate would prefill every row, and the extra votes were a second
batch: 2 × 17.8 s of a 120 s step on the miniature), drawn with TRL's own GenerationConfig (never the model's
defaults: transformers' top_k=50). With `--adaptive` it draws the N_train trained samples alone; the vote is
judged on them, and `hf_extra` draws the vote-only samples of the prompts still unsettled, in a second batch.
With TRL's vLLM rollouts (`use_vllm`) TRL generates the trained half and `sample_extra` draws the extra votes
from the same colocated engine, whose weights TRL has just synced and whose prefix cache holds the prompts,
with the sampling settings TRL gives that engine.
"""

from __future__ import annotations

from typing import Any

from testtime.models.confidence import completion_stats
from testtime.models.prefill import generate_shared, through_end

Votes = list[list[tuple[str, int]]]  # per prompt, k (text, completion tokens)


def vllm_sampling(generation: Any, k: int) -> dict[str, Any]:
    """SamplingParams fields for k samples, as TRL's colocated rollouts set them (one sample per row there)."""
    return {
        "n": k,
        "repetition_penalty": generation.repetition_penalty,
        "temperature": generation.temperature,
        "top_p": generation.top_p,
        "top_k": generation.top_k,
        "min_p": 0.0 if generation.min_p is None else generation.min_p,
        "max_tokens": generation.max_completion_length,
        **(generation.generation_kwargs or {}),
    }


def sample_extra(trainer: Any, prompts: list[Any], k: int) -> Votes:
    """k more samples of each prompt from TRL's colocated vLLM engine."""
    from vllm import SamplingParams

    tokenizer = trainer.processing_class
    rows = [{"prompt_token_ids": prompt_ids(tokenizer, [messages])[0][0].tolist()} for messages in prompts]
    params = SamplingParams(**vllm_sampling(trainer.vllm_generation, k))
    outputs = trainer.vllm_generation.llm.generate(rows, sampling_params=params, use_tqdm=False)
    return [
        [(tokenizer.decode(o.token_ids, skip_special_tokens=True), len(o.token_ids)) for o in output.outputs]
        for output in outputs
    ]


def hf_extra(trainer: Any, prompts: list[Any], k: int) -> Votes:
    """k more samples of each prompt from the policy on transformers, in one batch (each prompt's prefill shared),
    with TRL's own GenerationConfig: the vote-only samples of the prompts whose trained samples did not settle their
    vote (`--adaptive`), drawn once those were judged."""
    tokenizer = trainer.processing_class
    _, _, rows = _policy_samples(trainer, prompts, k)
    return [
        [(tokenizer.decode(row, skip_special_tokens=True), len(row)) for row in rows[g * k : (g + 1) * k]]
        for g in range(len(prompts))
    ]


def _policy_samples(trainer: Any, prompts: list[Any], k: int) -> tuple[Any, Any, list[list[int]]]:
    """k samples of each prompt from the policy in one batch (each prompt's prefill shared), with TRL's own
    GenerationConfig, cut at its end tokens as TRL cuts its own: the prompts' (ids, mask) and the samples, a
    prompt's k consecutive."""
    import torch

    model = trainer.accelerator.unwrap_model(trainer.model)
    ids, mask = prompt_ids(trainer.processing_class, prompts)
    counts = torch.full((len(prompts),), k, device=model.device)
    generated = generate_shared(
        model, ids.to(model.device), mask.to(model.device), counts, generation_config=trainer.generation_config
    )
    return ids, mask, [through_end(row, trainer.eos_token_ids) for row in generated.tolist()]


def shared_rollouts(
    prompts: list[Any], trainer: Any, *, n_train: int, n_vote: int, confidence: bool = False
) -> dict[str, Any]:
    """TRL's `rollout_func` on transformers: N_vote samples of each prompt in one batch, its prefill shared.

    TRL's batch holds each prompt N_train times, consecutively (its RepeatSampler). The first N_train samples
    are returned for training, with TRL's own GenerationConfig and EOS cut; the rest travel to the reward
    function as each row's `extra_votes`. With `confidence` (a confidence reward), each trained sample's token
    statistics under the policy that drew it travel too, as `token_stats` (one forward pass per group)."""

    groups = [prompts[start] for start in range(0, len(prompts), n_train)]
    if len(prompts) % n_train or any(prompt != groups[i // n_train] for i, prompt in enumerate(prompts)):
        raise RuntimeError("TRL's generation batch is not each prompt N_train times in a row; the vote needs groups")
    tokenizer = trainer.processing_class
    model = trainer.accelerator.unwrap_model(trainer.model)
    ids, mask, samples = _policy_samples(trainer, groups, n_vote)
    config = trainer.generation_config  # confidence under the distribution sampled from (greedy: read at 1)
    sampled_at = (config.temperature or 1.0) if config.do_sample else 1.0
    prompt_rows, completion_rows, extra_votes, stats = [], [], [], []
    for g in range(len(groups)):
        drawn = samples[g * n_vote : (g + 1) * n_vote]
        extras = [(tokenizer.decode(row, skip_special_tokens=True), len(row)) for row in drawn[n_train:]]
        prompt = ids[g][mask[g] == 1].tolist()
        prompt_rows += [prompt] * n_train
        completion_rows += drawn[:n_train]
        extra_votes += [extras] * n_train
        if confidence:
            stats += completion_stats(model, prompt, drawn[:n_train], sampled_at)
    rolled = {"prompt_ids": prompt_rows, "completion_ids": completion_rows, "logprobs": None}
    extras = {"extra_votes": extra_votes} if n_vote > n_train else {}  # none: drawn after the vote is judged
    return rolled | extras | ({"token_stats": stats} if confidence else {})


def prompt_ids(tokenizer: Any, conversations: list[Any]) -> tuple[Any, Any]:
    """The chat prompts as TRL renders them for generation: left-padded (input_ids, attention_mask)."""
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"  # generation continues every row from its last real token
    try:
        encoded = tokenizer.apply_chat_template(
            conversations, add_generation_prompt=True, padding=True, return_tensors="pt", return_dict=True
        )
    finally:
        tokenizer.padding_side = side
    return encoded["input_ids"], encoded["attention_mask"]
