"""TTRL on a cluster with verl (pinned to 0.8.0 by the `verl` extra; see docs/ttrl.md for why).

In verl ≥ 0.7 rewards are computed per sample while rollouts stream, so no reward function ever sees a
prompt's group. The vote therefore runs at the group barrier in the trainer: `trainer.py` subclasses verl's
`RayPPOTrainer` and wraps its rollout manager's `generate_sequences`, so that when a whole batch of
responses is back, `hook.apply_ttrl_vote` votes per prompt (by verl's `uid`) and writes the rewards into
`rm_scores` before verl's advantage step reads them. verl is never forked; the TaskRunner is swapped through
`run_ppo(config, task_runner_class=...)`, the extension point verl documents for recipes.

- `data.py`: problems → verl's RL parquet, with the ground truth left empty (labels never leave the scorer).
- `hook.py`: the vote on a verl `DataProto` (imports verl's types only when called).
- `config.py`: Hydra overrides from `TTRLSettings`, the paper's 8×A100 preset, and validation by verl's own
  config loading (`compose` + `validate_config`).
- `trainer.py`: the trainer subclass and the entry point `python -m testtime.methods.ttrl.verl.trainer`.
"""
