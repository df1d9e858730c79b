"""Shared prompt forward in GRPO's scoring: the same log-probabilities, entropies and gradient as TRL's own
row-by-row method, on the embedded model, with repeated and padded prompts mixed as TRL's shuffle mixes them."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest

from testtime.benchmarks.arith import Arith
from testtime.methods.ttrl.rollouts import prompt_ids
from testtime.methods.ttrl.trl_reward import as_chat

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def policy(random_model):
    pytest.importorskip("trl")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.trainer.utils import add_fused_lm_head

    path = random_model
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))  # as GRPOTrainer patches its model
    return model.train(), AutoTokenizer.from_pretrained(path)


def _batch(tokenizer):
    """Eight rows over four prompts (one short, so left-padded), ragged right-padded completions."""
    import torch

    benchmark = Arith()
    problems, _ = benchmark.load()
    conversations = [as_chat(benchmark.prompt(problems[i])) for i in range(3)] + [[{"role": "user", "content": "hi"}]]
    ids, mask = prompt_ids(tokenizer, conversations)
    rows = torch.tensor([0, 0, 1, 2, 3, 3, 1, 0])
    generator = torch.Generator().manual_seed(0)
    completion = torch.randint(100, 5000, (8, 12), generator=generator)
    completion_mask = (torch.arange(12) < torch.tensor([12, 3, 7, 12, 1, 5, 9, 12])[:, None]).long()
    completion = completion.masked_fill(completion_mask == 0, tokenizer.pad_token_id)
    return torch.cat([ids[rows], completion], 1), torch.cat([mask[rows], completion_mask], 1), completion_mask


def _score(model, score, completion_mask):
    """The scores and the gradient of a GRPO-like loss over them (entropy included, so its path is checked)."""
    import torch

    model.zero_grad()
    logps, entropy = score()
    loss = (logps * completion_mask).sum() / completion_mask.sum() + 0.1 * (entropy * completion_mask).mean()
    loss.backward()
    gradient = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    return logps.detach(), entropy.detach(), gradient


def test_the_shared_prompt_pass_scores_and_differentiates_as_trl(policy):
    from trl import GRPOTrainer

    from testtime.methods.ttrl.shared_prompt import shared_prompt_logps

    model, tokenizer = policy
    ids, mask, completion_mask = _batch(tokenizer)
    trainer = SimpleNamespace(accelerator=SimpleNamespace(autocast=contextlib.nullcontext, is_main_process=True))
    trl_logps, trl_entropy, trl_gradient = _score(
        model,
        lambda: GRPOTrainer._get_per_token_logps_and_entropies(trainer, model, ids, mask, 12, compute_entropy=True)[:2],
        completion_mask,
    )
    logps, entropy, gradient = _score(
        model, lambda: shared_prompt_logps(model, ids, mask, 12, compute_entropy=True), completion_mask
    )
    assert logps.shape == trl_logps.shape == (8, 12)
    assert (logps[completion_mask == 0] == 0).all()  # masked places are zero, as TRL's fused head gives them
    assert (logps - trl_logps).abs().max() < 1e-4
    assert (entropy - trl_entropy).abs().max() < 1e-4
    assert (gradient - trl_gradient).norm() < 1e-4 * trl_gradient.norm()
    assert trl_gradient.norm() > 0


def test_the_trainer_uses_trls_own_method_where_sharing_does_not_apply():
    pytest.importorskip("trl")
    from testtime.methods.ttrl.shared_prompt import shared_prompt_trainer

    calls = []

    class Base:
        args = SimpleNamespace(gradient_checkpointing=True)

        def _get_per_token_logps_and_entropies(self, *args, **kwargs):
            calls.append(args)
            return "trl"

    trainer = shared_prompt_trainer(Base)()
    ids = SimpleNamespace(size=lambda dim: 10)
    assert trainer._get_per_token_logps_and_entropies(None, ids, None, 4) == "trl"  # checkpointing recomputes
    trainer.args = SimpleNamespace(gradient_checkpointing=False)
    assert trainer._get_per_token_logps_and_entropies(None, ids, None, 4, pixel_values=object()) == "trl"
    assert trainer._get_per_token_logps_and_entropies(None, ids, None, 4, compute_aux_loss=True) == "trl"
    assert len(calls) == 3
