"""verl's PPO trainer with the TTRL vote at the group barrier, and the entry point that launches it.

`python -m testtime.methods.ttrl.verl.trainer OVERRIDES...` (with `+ttrl.settings_file`, the typed TTRL settings) is
what `testtime ttrl verl launch` runs. verl's `main_ppo` builds its trainer inside a Ray actor, so the swap to
`TTRLRayPPOTrainer` happens in that actor (`TTRLTaskRunner.run`), through the TaskRunner parameter verl offers
to recipes. Needs GPUs and verl's full stack; on CPU only the hook and the configuration are tested.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from verl.trainer import main_ppo
from verl.trainer.ppo.ray_trainer import RayPPOTrainer

from testtime.core.records import Problem
from testtime.methods.ttrl.recipe import TTRLSettings
from testtime.methods.ttrl.rewards import TrainedReward
from testtime.methods.ttrl.verl.hook import apply_ttrl_vote, texts_by_uid, token_rows, vote_only_batch
from testtime.methods.ttrl.verl.record import StepRecorder, safetensors_parameters
from testtime.sandbox.choose import open_sandbox
from testtime.selectors import SelectionContext, Selector


def settings_from_config(config: Any) -> TTRLSettings:
    """The run's typed TTRL settings, from the file `config.ttrl_overrides` names (`+ttrl.settings_file`)."""
    path = (config.get("ttrl") or {}).get("settings_file")
    if not path:
        raise ValueError("the verl config names no TTRL settings (+ttrl.settings_file=PATH, as testtime writes it)")
    return TTRLSettings.model_validate_json(Path(path).read_text())


def recorder_from_config(config: Any, settings: TTRLSettings) -> StepRecorder | None:
    """The recorder of each step's rollouts, votes and compute (`+ttrl.record_dir`); None when none is named."""
    folder = (config.get("ttrl") or {}).get("record_dir")
    if not folder:
        return None
    model = ((config.get("actor_rollout_ref") or {}).get("model") or {}).get("path", "")
    parameters = safetensors_parameters(Path(model)) if model else None
    return StepRecorder(Path(folder), model=f"hf:{model}", parameters=parameters, beta=settings.beta)


def problems_of(batch: Any) -> list[Problem]:
    """Each row's problem from the parquet's `extra_info` (statement and public examples; no label)."""
    found = []
    for info in batch.non_tensor_batch.get("extra_info", [None] * len(batch)):
        if isinstance(info, dict) and info.get("problem"):
            found.append(Problem.model_validate_json(info["problem"]))
        else:  # a math row written without it: the domain is all the vote needs
            found.append(Problem(id=str((info or {}).get("index", "")), domain="math", statement=""))
    return found


class TTRLRayPPOTrainer(RayPPOTrainer):
    """RayPPOTrainer whose rollouts come back with TTRL's vote rewards in `rm_scores`."""

    def init_workers(self) -> None:
        super().init_workers()
        self.install_vote_hook()

    def install_vote_hook(self) -> None:
        manager = self.async_rollout_manager
        generate = manager.generate_sequences
        settings = settings_from_config(self.config)
        policy, rng = settings.vote_policy(), random.Random(0)
        trained = TrainedReward(settings.reward, settings.random_p, embedder=settings.novelty_embedder)
        selectors: dict[str, Selector] = {}
        sandboxes: list[Any] = []

        def context(problem: Problem) -> SelectionContext:
            if problem.domain != "code":
                return SelectionContext()
            if not sandboxes:
                sandboxes.append(open_sandbox("auto"))  # the code reward runs programs: on this node's sandbox
            return SelectionContext(sandbox=sandboxes[0])

        extra = settings.n_vote - settings.n_train  # rollout.n is n_train: the rest are sampled to vote only
        recorder = recorder_from_config(self.config, settings)

        def generate_and_vote(batch: Any, *args: Any, **kwargs: Any) -> Any:
            output = generate(batch, *args, **kwargs)
            # Input rows are interleave-repeated per prompt and the output keeps their order.
            problems = problems_of(batch)
            domain = problems[0].domain if problems else "math"
            selector = selectors.setdefault(domain, settings.build(domain))
            uids = list(batch.non_tensor_batch["uid"])
            vote_only, vote_only_rows = None, []
            if extra > 0:
                more = vote_only_batch(batch, uids, extra)
                answered = generate(more, *args, **kwargs)
                vote_only = texts_by_uid(answered, list(more.non_tensor_batch["uid"]), self.tokenizer)
                vote_only_rows = token_rows(answered, problems_of(more))
            metrics, votes = apply_ttrl_vote(
                output, uids, problems, self.tokenizer, policy, selector, context, rng, trained, vote_only
            )
            output.meta_info.setdefault("metrics", {}).update(metrics)
            if recorder is not None and not batch.meta_info.get("validate"):  # validation is not training
                step = int(batch.meta_info.get("global_steps", 0))
                recorder.record(step, votes, token_rows(output, problems), vote_only_rows)
            return output

        manager.generate_sequences = generate_and_vote


class TTRLTaskRunner(main_ppo.TaskRunner):
    def run(self, config: Any) -> Any:
        main_ppo.RayPPOTrainer = TTRLRayPPOTrainer  # inside this Ray actor only
        return super().run(config)


def main() -> None:
    import hydra
    import ray

    @hydra.main(config_path="pkg://verl.trainer.config", config_name="ppo_trainer", version_base=None)
    def entry(config: Any) -> None:
        from verl.experimental.reward_loop.reward_loop import migrate_legacy_reward_impl

        main_ppo.run_ppo(migrate_legacy_reward_impl(config), task_runner_class=ray.remote(num_cpus=1)(TTRLTaskRunner))

    entry()


if __name__ == "__main__":
    main()
