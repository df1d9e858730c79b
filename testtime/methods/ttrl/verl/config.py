"""verl's Hydra configuration for a TTRL run: overrides from `TTRLSettings`, checked by verl's own loader.

The overrides follow verl's GRPO recipe (reference ttrl.md §12) and TTRL's scripts (§8). verl trains every
response it generates, so `rollout.n = n_train`, and the trainer's hook samples the `n_vote - n_train`
responses that only vote at the group barrier (hook.py): the vote sees 64 and the update 32, as in TTRL's
fork. `PAPER_8XA100` is the paper's cluster setup (one node, 8 GPUs, vLLM rollouts, FSDP with the reference
model offloaded); `--nnodes`/`--gpus-per-node` scale it out over a Ray cluster (`cluster`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from testtime.core.errors import UserError
from testtime.methods.ttrl.recipe import CONFIDENCE_REWARDS, TTRLSettings

PAPER_8XA100 = {
    "trainer.nnodes": 1,
    "trainer.n_gpus_per_node": 8,
    "actor_rollout_ref.rollout.name": "vllm",
    "actor_rollout_ref.rollout.tensor_model_parallel_size": 1,
    "actor_rollout_ref.rollout.gpu_memory_utilization": 0.8,
    "actor_rollout_ref.rollout.enforce_eager": False,
    "actor_rollout_ref.rollout.free_cache_engine": False,
    "actor_rollout_ref.ref.fsdp_config.param_offload": True,
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 2,
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": 2,
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": 2,
}
PRESETS = {"paper-8xa100": PAPER_8XA100}


def write_settings(settings: TTRLSettings, path: Path) -> Path:
    """The typed settings the trainer's vote reads back (`+ttrl.settings_file`): selector and its options,
    vote policy and reward, exactly as `testtime run --method ttrl` would use them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(settings.model_dump_json(indent=2) + "\n")
    return path


def ttrl_overrides(
    settings: TTRLSettings,
    *,
    model_path: str,
    train_file: Path,
    val_file: Path,
    output_dir: Path,
    settings_file: Path,
    record_dir: Path | None = None,
    model_name: str = "",
    preset: str = "paper-8xa100",
    max_prompt_length: int = 1024,
    extra: dict[str, Any] | None = None,
    nnodes: int | None = None,
    gpus_per_node: int | None = None,
) -> list[str]:
    """Hydra override strings for `ppo_trainer` (verl 0.8)."""
    if preset not in PRESETS:
        raise UserError(f"unknown verl preset '{preset}'; choose from {', '.join(PRESETS)}")
    if settings.reward == "oracle":  # its labels would have to travel in the parquet: the channel stays in-process
        raise UserError("the oracle reward runs on TRL (testtime run --method ttrl), not yet on verl")
    if settings.reward in CONFIDENCE_REWARDS:  # verl's rollouts carry the sampled tokens' log-probs, not p
        raise UserError(f"reward={settings.reward} needs the policy's token distribution: on TRL, not yet on verl")
    reward_file = Path(__file__).with_name("reward.py")
    values: dict[str, Any] = {
        "algorithm.adv_estimator": "grpo",
        "algorithm.use_kl_in_reward": False,
        "data.train_files": str(train_file),
        "data.val_files": str(val_file),
        "data.train_batch_size": settings.prompts_per_step,
        "data.max_prompt_length": max_prompt_length,
        "data.max_response_length": settings.max_response,
        "actor_rollout_ref.model.path": model_path,
        "actor_rollout_ref.actor.optim.lr": settings.lr,
        "actor_rollout_ref.actor.optim.lr_warmup_steps_ratio": settings.warmup_ratio,
        "actor_rollout_ref.actor.optim.weight_decay": settings.weight_decay,
        "actor_rollout_ref.actor.ppo_mini_batch_size": settings.mini_batch_prompts,
        "actor_rollout_ref.actor.use_kl_loss": settings.beta > 0,
        "actor_rollout_ref.actor.kl_loss_coef": settings.beta,
        "actor_rollout_ref.actor.kl_loss_type": "low_var_kl",
        "actor_rollout_ref.rollout.n": settings.n_train,
        "actor_rollout_ref.rollout.temperature": settings.train_temperature(model_name or model_path),
        "actor_rollout_ref.rollout.top_p": settings.top_p,
        "reward.custom_reward_function.path": str(reward_file),
        "reward.custom_reward_function.name": "extract_only",
        "trainer.total_training_steps": settings.steps,  # None: epochs decide
        "trainer.total_epochs": settings.epochs,
        "trainer.val_before_train": False,  # verl has no labels to validate against; testtime evaluates
        "trainer.test_freq": -1,
        "trainer.save_freq": settings.save_steps,
        "trainer.default_local_dir": str(output_dir),
        "trainer.logger": "[console]",
        "trainer.project_name": "testtime-ttrl",
        # read by trainer.TTRLRayPPOTrainer: the reward's selector, vote policy and reward, all of TTRLSettings
        "+ttrl.settings_file": str(settings_file),
        # where each step's rollouts, votes and compute are recorded (`record.py`), as a TRL run records them
        **({"+ttrl.record_dir": str(record_dir)} if record_dir is not None else {}),
        **PRESETS[preset],
        **cluster(nnodes, gpus_per_node),
        **(extra or {}),
    }
    if settings.lr_scheduler == "cosine":
        values["actor_rollout_ref.actor.optim.lr_scheduler_type"] = "cosine"
    return [f"{key}={_hydra(value)}" for key, value in values.items() if value is not None]


def cluster(nnodes: int | None, gpus_per_node: int | None) -> dict[str, Any]:
    """The cluster's shape, where given (else the preset's): verl places its workers over
    `trainer.nnodes × trainer.n_gpus_per_node` GPUs of the Ray cluster it joins."""
    for flag, value in (("--nnodes", nnodes), ("--gpus-per-node", gpus_per_node)):
        if value is not None and value < 1:
            raise UserError(f"{flag} must be at least 1, not {value}")
    shape = {"trainer.nnodes": nnodes, "trainer.n_gpus_per_node": gpus_per_node}
    return {key: value for key, value in shape.items() if value is not None}


def submit_script(overrides: list[str], address: str | None) -> str:
    """`submit.sh`: the run as a Ray job on an existing cluster (`ray job submit`), its driver on the head node.
    Every node needs testtime with the verl extra, and the data, settings and checkpoint paths must be on a
    filesystem all nodes mount at the same path."""
    import shlex

    where = shlex.quote(address) if address else '"${RAY_ADDRESS:?set RAY_ADDRESS or pass --ray-address}"'
    command = shlex.join(["python3", "-m", "testtime.methods.ttrl.verl.trainer", *overrides])
    return f'#!/bin/sh\nset -e\nexec ray job submit --address {where} -- {command} "$@"\n'


def _hydra(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def compose(overrides: list[str]) -> Any:
    """verl's own `ppo_trainer` config with the overrides applied, migrated and resolved as verl's entry does."""
    try:
        from hydra import compose as hydra_compose
        from hydra import initialize_config_module
        from omegaconf import OmegaConf
        from verl.experimental.reward_loop.reward_loop import migrate_legacy_reward_impl
    except ImportError:
        raise UserError("verl is not installed: pip install 'testtime[verl]'") from None
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        config = hydra_compose(config_name="ppo_trainer", overrides=overrides)
    config = migrate_legacy_reward_impl(config)
    OmegaConf.resolve(config)
    return config


def validate(config: Any) -> None:
    """verl's own checks (batch divisibility, micro-batch settings, actor config); raises on a bad config."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
