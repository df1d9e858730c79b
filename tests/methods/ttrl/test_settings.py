"""TTRL settings: the paper's defaults, the cpu preset, overrides and clear errors."""

import pytest

from testtime.core.errors import UserError
from testtime.methods.ttrl.settings import TTRLSettings


def test_paper_defaults():
    s = TTRLSettings.from_options({})
    assert (s.n_vote, s.n_train, s.lr, s.beta, s.max_response) == (64, 32, 5e-7, 0.001, 3072)
    assert (s.lr_scheduler, s.warmup_ratio, s.eval_samples, s.eval_temperature, s.eval_top_p) == (
        "cosine",
        0.03,
        16,
        0.6,
        0.95,
    )
    assert s.train_temperature("hf:Qwen2.5-Math-7B") == 1.0
    assert s.train_temperature("hf:Llama-3.1-8B-Instruct") == 0.6
    assert s.rollout_steps(30) == 10 * (30 // 8)


def test_cpu_preset_then_explicit_options_on_top():
    s = TTRLSettings.from_options({"preset": "cpu", "lr": "1e-5", "steps": "3"})
    assert (s.n_vote, s.n_train, s.prompts_per_step, s.beta) == (16, 8, 4, 0.001)
    assert s.lr == 1e-5 and s.rollout_steps(48) == 3
    assert s.train_temperature("hf:smollm2-135m") == 1.0 and s.eval_temperature == 1.0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"preset": "gpu"}, "unknown preset"),
        ({"n_vote": "4", "n_train": "8"}, "cannot exceed n_vote"),
        ({"lr": "fast"}, "ttrl option lr"),
        ({"prompts_per_step": "3", "mini_batch_prompts": "2"}, "multiple of mini_batch_prompts"),
        ({"colour": "blue"}, "ttrl option colour"),
    ],
)
def test_bad_options_are_user_errors(options, message):
    with pytest.raises(UserError, match=message):
        TTRLSettings.from_options(options)
