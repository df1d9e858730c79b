"""TTRL's knobs with the paper's defaults (reference ttrl.md §8, §10) and a `cpu` preset that fits a 2-core box.

`paper`: N_vote 64 / N_train 32, lr 5e-7 with cosine decay and 3% warm-up, weight decay 0.01, KL 0.001, max
response 3072, 8 prompts per rollout step with one optimiser step per prompt (verl's `ppo_mini_batch_size=1`),
temperature 1.0 for Math models and 0.6 otherwise; evaluation avg@16 at T=0.6 / top-p 0.95 plus greedy. `cpu`:
the same recipe at the miniature's size (12 rollout steps of 4 prompts, 16 votes of which 8 are trained, 32 new
tokens, 8 evaluation samples), at T=1.0 with lr 2e-6 (see the preset's comment). An earlier cpu recipe (8 votes
all trained, 2 prompts per step, lr 5e-6, no KL; environment.md §10) did not reproduce: pseudo-label accuracy
stayed near 0.2 and pass@1 fell on both the H200 and the CPU, so it was replaced. Every field can be overridden
by a flag or `--method-opt KEY=VALUE`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from testtime.core.errors import UserError, first_error

PRESETS: dict[str, dict[str, Any]] = {
    "paper": {},
    # The paper's recipe at a size a 2-core box trains in ~20 minutes, with the temperature it uses for Math
    # models (1.0) for training and evaluation: there the embedded model's majority beats a sample (pass@1
    # 0.18, maj@8 0.38 on the miniature's problems); at T=0.6 they tie (0.36 / 0.34) and the vote carries no
    # signal. A higher learning rate (2e-6) because 48 updates at 5e-7 barely moved it on CPU (README).
    "cpu": {
        "temperature": 1.0,
        "eval_temperature": 1.0,
        "eval_top_p": 1.0,
        "lr": 2e-6,
        "steps": 12,
        "prompts_per_step": 4,
        "n_vote": 16,
        "n_train": 8,
        "max_response": 32,
        "eval_samples": 8,
        "save_steps": 4,
        "gradient_checkpointing": False,
    },
}


class TTRLSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    preset: Literal["paper", "cpu"] = "paper"
    steps: int | None = Field(default=None, ge=1)  # rollout steps; None = epochs over the problem set
    epochs: int = Field(default=10, ge=1)  # MATH-500's 10; the paper uses 80 on AIME, 30 on AMC
    prompts_per_step: int = Field(default=8, ge=1)
    mini_batch_prompts: int = Field(default=1, ge=1)  # prompts per optimiser step (verl ppo_mini_batch_size)
    n_vote: int = Field(default=64, ge=1)
    n_train: int = Field(default=32, ge=2)  # GRPO needs a group of at least two
    lr: float = Field(default=5e-7, gt=0)
    lr_scheduler: str = "cosine"
    warmup_ratio: float = Field(default=0.03, ge=0, le=1)
    weight_decay: float = Field(default=0.01, ge=0)
    beta: float = Field(default=0.001, ge=0)  # KL to the reference policy; 0 loads no reference model
    loss_type: str = "dapo"  # TRL's token-level mean, as verl's default loss_agg_mode=token-mean
    max_response: int = Field(default=3072, ge=1)
    temperature: float | None = Field(default=None, gt=0)  # None: 1.0 for *Math* models, else 0.6
    top_p: float = Field(default=1.0, gt=0, le=1)
    tie_policy: Literal["earliest", "random"] = "earliest"
    downsample: Literal["first", "random"] = "first"
    min_majority_ratio: float = Field(default=0.0, ge=0, le=1)
    eval_samples: int = Field(default=16, ge=1)
    eval_temperature: float = Field(default=0.6, gt=0)
    eval_top_p: float = Field(default=0.95, gt=0, le=1)
    eval_greedy: bool = True
    save_steps: int = Field(default=20, ge=1)
    collapse: Literal["warn", "stop", "off"] = "warn"
    # Saves activation memory on big models; on a small CPU model it only costs time (and disables the
    # KV cache during TRL's generation).
    gradient_checkpointing: bool = True
    lora: bool = False
    lora_rank: int = Field(default=16, ge=1)
    use_vllm: bool = False

    @model_validator(mode="after")
    def _check(self) -> TTRLSettings:
        if self.n_train > self.n_vote:
            raise ValueError(f"n_train ({self.n_train}) cannot exceed n_vote ({self.n_vote})")
        if self.prompts_per_step % self.mini_batch_prompts:
            raise ValueError("prompts_per_step must be a multiple of mini_batch_prompts")
        return self

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> TTRLSettings:
        """Preset first, then the explicit options on top (flags and --method-opt arrive as text)."""
        preset = str(options.get("preset", "paper"))
        if preset not in PRESETS:
            raise UserError(f"ttrl: unknown preset '{preset}'; choose from {', '.join(PRESETS)}")
        try:
            return cls.model_validate({**PRESETS[preset], **options, "preset": preset})
        except ValidationError as exc:
            where, message = first_error(exc)
            raise UserError(f"ttrl option {where}: {message}" if where else f"ttrl: {message}") from None

    def train_temperature(self, model_name: str) -> float:
        if self.temperature is not None:
            return self.temperature
        return 1.0 if "math" in model_name.lower() else 0.6

    def rollout_steps(self, problems: int) -> int:
        """Rollout steps to run: --steps, else epochs over the set (drop_last, as verl), at least one."""
        if self.steps is not None:
            return self.steps
        return self.epochs * max(1, problems // self.prompts_per_step)
