"""A tiny language model for tests of mechanics (TTRL's steps, resume, streams), built from a config in a
fraction of a second: no download, no 135M-parameter forward passes. It uses the embedded model's tokenizer
and chat template, and its weights are set so that it answers like a model that has learned the format:

    math: <prompt ending in "\\n"> → " \\boxed{1}" or " \\boxed{2}" (a coin flip at the digit) → end of turn
    code: <prompt ending in "\\n"> → " ```python", "print(1)" or "print(2)", "```" → end of turn

The attention and MLP output projections start at zero, so each position's hidden state is its token's
embedding: a one-hot "state" for the tokens of that answer, whose unembedding names the next token. Votes
then split between two answers, rewards differ within a group, and GRPO has a gradient to follow (which
moves every weight after the first step). Where learning or real answers matter, tests use the embedded
model instead.
"""

from __future__ import annotations

from pathlib import Path

LOGIT = 30.0  # per unit of the normalised state: the chosen next token is all but certain


def build_scripted_model(folder: Path, domain: str = "math") -> Path:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from testtime.models.hf import embedded_model_dir

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir("smollm2-135m"))
    vocab = tokenizer.get_vocab()
    one, two, end = vocab["1"], vocab["2"], tokenizer.eos_token_id
    # Each token of the answer once (a token's successor is all the model knows): a newline of one, two and
    # three characters where the code needs three newlines, and the opening fence with its leading space.
    if domain == "math":
        before, after = ["Ċ", "Ġ\\", "box", "ed", "{"], ["}"]
    else:
        before, after = ["Ċ", "Ġ```", "python", "ĊĊ", "print", "("], [")", "ĊĊĊ", "```"]
    chain = [vocab[t] for t in before]
    tail = [vocab[t] for t in after]
    # state → (its token, the tokens it may be followed by)
    script = [(chain[i], [chain[i + 1]]) for i in range(len(chain) - 1)] + [(chain[-1], [one, two])]
    script += [(one, [tail[0]]), (two, [tail[0]])]
    script += [(tail[i], [tail[i + 1]]) for i in range(len(tail) - 1)] + [(tail[-1], [end])]
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=len(script) + len(script) % 2, intermediate_size=16,
        num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096, tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=end, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        model.model.embed_tokens.weight.zero_()
        model.lm_head.weight.zero_()
        for state, (token, following) in enumerate(script):
            model.model.embed_tokens.weight[token, state] = 1.0
            for successor in following:
                model.lm_head.weight[successor, state] = LOGIT
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
    model.generation_config.eos_token_id = end
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_random_model(folder: Path, eos_boost: float = 4.0) -> Path:
    """A tiny Llama with random weights and the embedded tokenizer, for tests that compare two computations
    of one model (a shared prefill against generating alone, statistics from a forward pass against those at
    generation, seeds against concurrency): any model will do, a small one in milliseconds. Its end-of-turn
    token is favoured in some states (`eos_boost`), so completions end at different lengths."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from testtime.models.hf import embedded_model_dir

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir("smollm2-135m"))
    end = tokenizer.eos_token_id
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096, tie_word_embeddings=False,
        initializer_range=0.2, bos_token_id=tokenizer.bos_token_id, eos_token_id=end,
        pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        model.lm_head.weight[end] *= eos_boost
    model.generation_config.eos_token_id = end
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
