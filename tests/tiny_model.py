"""A tiny language model for tests of mechanics (TTRL's steps, resume, streams), built from a config in a
fraction of a second: no download, no 135M-parameter forward passes. It uses the embedded model's tokenizer
and chat template, and its weights are set so that it answers like a model that has learned the format:

    <prompt ending in "\\n"> → " \\boxed{1}" or " \\boxed{2}" (a coin flip at the digit) → end of turn

The attention and MLP output projections start at zero, so each position's hidden state is its token's
embedding: a one-hot "state" for the tokens of that answer, whose unembedding names the next token. Votes
then split between two answers, rewards differ within a group, and GRPO has a gradient to follow (which
moves every weight after the first step). Where learning or real answers matter, tests use the embedded
model instead.
"""

from __future__ import annotations

from pathlib import Path

LOGIT = 30.0  # per unit of the normalised state: the chosen next token is all but certain


def build_scripted_model(folder: Path) -> Path:
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from testtime.models.hf import embedded_model_dir

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir("smollm2-135m"))
    answer = tokenizer.encode(" \\boxed{1}")  # ' \\', 'box', 'ed', '{', '1', '}'
    one, two, close = answer[4], tokenizer.encode("2")[-1], answer[5]
    newline, end = tokenizer.encode("\n")[-1], tokenizer.eos_token_id
    # state → (its token, the tokens it may be followed by)
    script = [(newline, [answer[0]]), *((answer[i], [answer[i + 1]]) for i in range(3))]
    script += [(answer[3], [one, two]), (one, [close]), (two, [close]), (close, [end])]
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=len(script), intermediate_size=16, num_hidden_layers=2,
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
