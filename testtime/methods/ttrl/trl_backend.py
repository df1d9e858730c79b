"""TTRL on one node with TRL's GRPOTrainer: CPU or GPU, optional vLLM rollouts (colocated) and LoRA.

One rollout step = one generation batch of `prompts_per_step` prompts × N_train completions, split into
optimiser steps of `mini_batch_prompts` prompts' worth of rows (TRL's `steps_per_generation`), so the paper's
one-prompt mini-batches become several updates per rollout, as in verl (TRL shuffles the rows before it splits
them, so an update mixes prompts). On transformers all N_vote samples of a prompt are one shared-prefill batch
(`rollouts.py`) and each prompt's forward is shared by its rows in training (`shared_prompt.py`); with
`use_vllm`, TRL's colocated engine generates. Written to the run directory:
`ttrl/steps.jsonl` (one line per optimiser step: TRL's metrics, the label-free vote statistics and, on the
first step of each rollout, every prompt's vote with its kept answers and rewards), TRL checkpoints in
`ttrl/checkpoints/` (a resumed run continues from the last one) and the trained model in `ttrl/final/`.
Every optimiser step is a `train_step` ledger line with its tokens, wall time and a FLOPs estimate.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testtime.core.adaptive import Adaptive
from testtime.core.errors import UserError
from testtime.core.extras import require
from testtime.core.ledger import Ledger, LedgerEntry
from testtime.core.oracle import LabelOracle
from testtime.core.records import Message, Problem, SamplingParams
from testtime.core.results import TTRLStep
from testtime.methods.ttrl.knowledge import KNOWLEDGE_SLOT, RolloutKnowledge
from testtime.methods.ttrl.monitor import LabelHistory, primed_alarm
from testtime.methods.ttrl.recipe import CONFIDENCE_REWARDS, TTRLSettings
from testtime.methods.ttrl.rollouts import hf_extra, prompt_ids, sample_extra, shared_rollouts
from testtime.methods.ttrl.shared_prompt import shared_prompt_trainer
from testtime.methods.ttrl.trl_reward import RunAsync, StepBuffer, VoteReward, append_step, as_chat, resume_steps
from testtime.selectors import SelectionContext, Selector

# TRL's per-step log keys, kept in steps.jsonl under shorter names.
TRL_METRICS = {
    "loss": "loss",
    "grad_norm": "grad_norm",
    "learning_rate": "learning_rate",
    "entropy": "entropy",
    "reward": "reward",
    "reward_std": "reward_std",
    "frac_reward_zero_std": "frac_reward_zero_std",
    "completions/mean_length": "mean_length",
    "completions/clipped_ratio": "truncation_rate",
    "kl": "kl",
}


TENSORBOARD = "TENSORBOARD_LOGGING_DIR"


def require_trl() -> None:
    """Fail before a run directory exists when the training extra is missing."""
    require("ttrl", "train", "torch", "trl", "datasets")


def _last_checkpoint(folder: Path) -> Path | None:
    found = [p for p in folder.glob("checkpoint-*") if (p / "trainer_state.json").is_file()]
    return max(found, key=lambda p: int(p.name.split("-")[-1]), default=None)


@dataclass
class TrainingJob:
    """Everything one TTRL training needs, handed to `train_ttrl` in one piece."""

    model_path: str  # the weights to start from
    problems: Sequence[Problem]
    prompt: Callable[[Problem], list[Message]]
    settings: TTRLSettings
    rollout: SamplingParams  # what the rollouts sample with (the manifest's `ttrl_rollout` entry)
    workdir: Path  # the run directory: ttrl/ goes under it
    ledger: Ledger
    model_name: str
    selector: Selector
    context: Callable[[Problem], SelectionContext]
    seed: int = 0
    run_async: RunAsync[Any] = asyncio.run  # the reward's votes: on the run's event loop where there is one
    oracle: LabelOracle | None = None  # the `oracle` reward's labels; None for every label-free reward
    # A stop signal (Ctrl-C, SIGTERM): the step in flight finishes, is checkpointed, and training ends there
    stop_requested: Callable[[], bool] = lambda: False
    # Online TTRL: the stream's earlier updates' steps.jsonl, so label flips and the collapse alarm span updates
    earlier_steps: tuple[Path, ...] = ()
    vote_stop: Adaptive | None = None  # --adaptive: a prompt whose trained samples settle its vote draws no more
    # False: no checkpoints (a served update: a stop abandons it and a restart trains it again from its start, so
    # a checkpoint, the weights and AdamW's state, 1.6 GB at 135M, would only take disk and time)
    checkpoints: bool = True

    @property
    def root(self) -> Path:
        return self.workdir / "ttrl"


def make_callback(job: TrainingJob, buffer: StepBuffer, parameters: int, started_step: int) -> Any:
    from transformers import TrainerCallback

    settings, steps_path, trained_model = job.settings, job.root / "steps.jsonl", f"{job.model_name}+ttrl"
    alarm = primed_alarm((*job.earlier_steps, steps_path))

    class TTRLCallback(TrainerCallback):
        """Per optimiser step: one steps.jsonl line, one ledger line, and the collapse check."""

        def __init__(self) -> None:
            self.clock = time.perf_counter()
            self.seen_tokens: float | None = None

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **_: Any) -> None:
            logs = logs or {}
            if "loss" not in logs or state.global_step <= started_step:
                return  # the end-of-training summary line, or a replayed step
            now = time.perf_counter()
            total = logs.get("num_tokens")  # TRL's running count, logged with each generation batch
            trained = 0
            if total is not None:
                trained, self.seen_tokens = int(total - (self.seen_tokens or 0)), total
            votes, stats, rollout_tokens = buffer.take()
            record: dict[str, Any] = {"step": state.global_step, "seconds": now - self.clock}
            record.update({short: logs[key] for key, short in TRL_METRICS.items() if key in logs})
            record.update(stats)
            if votes:
                record["votes"] = [v.model_copy(update={"step": state.global_step}) for v in votes]
                record["knowledge"], buffer.knowledge = buffer.knowledge, None
            # FLOPs: forward+backward on trained tokens (6N), plus forward passes for rollouts (2N) and, with
            # a KL term, the reference model (2N). An estimate, stated as one, of a row-by-row forward: the
            # shared prompt pass (shared_prompt.py) does less, so it errs against TTRL.
            flops = 6 * parameters * trained + 2 * parameters * rollout_tokens
            flops += 2 * parameters * trained if settings.beta > 0 else 0
            job.ledger.record(
                LedgerEntry(
                    kind="train_step",
                    model=trained_model,
                    purpose="ttrl_update",
                    step=state.global_step,
                    seconds=record["seconds"],
                    train_tokens=trained,
                    flops=float(flops),
                )
            )
            if settings.collapse != "off":
                reason = alarm.update(record)
                if reason:
                    record["collapse_alarm"] = reason
                    control.should_training_stop = settings.collapse == "stop"
            append_step(steps_path, TTRLStep.model_validate(record))
            self.clock = now

        def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
            if job.stop_requested():
                control.should_save = True  # the resume point: nothing trained is lost
                control.should_training_stop = True

    return TTRLCallback()


def quiet_console(trainer: Any) -> None:
    """TRL's metrics go to `steps.jsonl` (and `report_to`), not as a dict a step on the console, which buried the
    run's own lines; the step bar stays where a person watches (a terminal), and nothing shows in a log file."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    class StepBar(ProgressCallback):
        def on_log(self, *args: Any, **kwargs: Any) -> None:
            return

    trainer.remove_callback(ProgressCallback)
    trainer.remove_callback(PrinterCallback)
    if sys.stderr.isatty():
        trainer.add_callback(StepBar())


def train_ttrl(job: TrainingJob) -> Path | None:
    """Train with the selection reward until the configured steps (or a collapse stop); returns `ttrl/final`,
    or None when a stop signal ended training early (its last step checkpointed: `--resume` continues)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # TRL's tensorboard callback reads its folder from the environment: this run's, for this run only (a second
    # run in one process, from the API, must not log into the first's), unless the user chose one
    chosen = os.environ.get(TENSORBOARD)
    os.environ[TENSORBOARD] = chosen or str(job.root / "tensorboard")
    try:
        with warnings.catch_warnings():
            # the libraries' deprecation notices to each other (ten a CPU run, in a log file) are not the user's
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"(transformers|trl|torch|accelerate)\.")
            return _train(job)
    finally:
        if chosen is None:
            os.environ.pop(TENSORBOARD, None)


def _knowledge(job: TrainingJob) -> RolloutKnowledge:
    """knowledge=trt: each prompt's list, its reflections asked through the run's engine (`knowledge` calls)."""

    async def ask(problem: Problem, messages: list[Message], step: int) -> str:
        calls = job.context(problem).calls
        assert calls is not None, "a training vote's context has the problem's calls"
        [completion] = await calls.sample("knowledge", 1, messages, step=step, slot=KNOWLEDGE_SLOT)
        return completion.text if completion.error is None else ""

    return RolloutKnowledge(job.problems, lambda problem: as_chat(job.prompt(problem)), ask)


def _train(job: TrainingJob) -> Path | None:
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    settings, problems, root = job.settings, job.problems, job.root
    final = root / "final"
    if (final / "config.json").is_file():
        return final
    if len(problems) < settings.prompts_per_step:
        raise UserError(f"ttrl: {len(problems)} problems is fewer than prompts_per_step={settings.prompts_per_step}")
    checkpoints = root / "checkpoints"
    checkpoints.mkdir(parents=True, exist_ok=True)
    history = LabelHistory()
    for path in job.earlier_steps:
        resume_steps(path, history)
    started_step = resume_steps(root / "steps.jsonl", history)
    updates_per_rollout = settings.prompts_per_step // settings.mini_batch_prompts
    gpu = torch.cuda.is_available()
    config = GRPOConfig(
        output_dir=str(checkpoints),
        max_steps=settings.rollout_steps(len(problems)) * updates_per_rollout,
        per_device_train_batch_size=settings.n_train * settings.mini_batch_prompts,
        gradient_accumulation_steps=1,
        steps_per_generation=updates_per_rollout,
        num_generations=settings.n_train,
        max_completion_length=job.rollout.max_tokens,
        temperature=job.rollout.temperature,
        top_p=job.rollout.top_p,
        learning_rate=settings.lr,
        lr_scheduler_type=settings.lr_scheduler,
        warmup_steps=settings.warmup_ratio,  # a float below 1 is a ratio of all steps
        weight_decay=settings.weight_decay,
        beta=settings.beta,
        loss_type=settings.loss_type,
        gradient_checkpointing=settings.gradient_checkpointing,
        use_vllm=settings.use_vllm,
        vllm_mode="colocate",
        use_cpu=not gpu,
        bf16=gpu,
        logging_steps=1,
        save_strategy="steps" if job.checkpoints else "no",
        save_steps=settings.save_steps,
        save_total_limit=1,  # resume needs only the last; each holds weights and AdamW state (1.6 GB at 135M)
        report_to=[t.strip() for t in settings.report_to.split(",") if t.strip()],
        seed=job.seed,
        disable_tqdm=False,
    )
    dataset = Dataset.from_list([{"prompt": as_chat(job.prompt(p)), "problem_id": p.id} for p in problems])
    buffer = StepBuffer()
    reward = VoteReward(
        settings,
        {p.id: p for p in problems},
        job.selector,
        job.context,
        ledger=job.ledger,
        model_name=f"{job.model_name}+ttrl",
        buffer=buffer,
        history=history,
        seed=job.seed,
        run_async=job.run_async,
        oracle=job.oracle,
        vote_stop=job.vote_stop,
    )
    peft_config = None
    if settings.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=settings.lora_rank, lora_alpha=2 * settings.lora_rank, target_modules="all-linear", task_type="CAUSAL_LM"
        )
    rollout = None  # vLLM: TRL's colocated engine generates; transformers: every vote in one shared-prefill batch
    knowledge = _knowledge(job) if settings.knowledge == "trt" else None
    if not settings.use_vllm:
        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is marked experimental

        def rollout(prompts: list[Any], trainer: Any) -> dict[str, Any]:
            confidence = settings.reward in CONFIDENCE_REWARDS
            if knowledge is not None:  # each prompt with its lessons so far (GRPO trains on what was rolled out)
                prompts = [knowledge.augment(p) for p in prompts]
            # --adaptive: the trained samples first; the reward draws the unsettled prompts' votes (`hf_extra`)
            n_vote = settings.n_train if job.vote_stop is not None else settings.n_vote
            return shared_rollouts(prompts, trainer, n_train=settings.n_train, n_vote=n_vote, confidence=confidence)

    trainer = shared_prompt_trainer(GRPOTrainer)(
        model=job.model_path,
        reward_funcs=reward,
        args=config,
        train_dataset=dataset,
        peft_config=peft_config,
        rollout_func=rollout,
    )
    tokenizer = trainer.processing_class
    reward.count_prompt_tokens = lambda messages: len(prompt_ids(tokenizer, [messages])[0][0])
    reward.knowledge = knowledge
    if settings.n_vote > settings.n_train and (settings.use_vllm or job.vote_stop is not None):
        extra = sample_extra if settings.use_vllm else hf_extra
        reward.extra_votes = lambda prompts, k: extra(trainer, prompts, k)
    parameters = sum(p.numel() for p in trainer.model.parameters())
    trainer.add_callback(make_callback(job, buffer, parameters, started_step))
    quiet_console(trainer)
    trainer.train(resume_from_checkpoint=str(_last_checkpoint(checkpoints) or "") or None)
    if job.stop_requested() and trainer.state.global_step < config.max_steps:
        return None
    staging = root / "final.tmp"
    trainer.save_model(str(staging))
    tokenizer.save_pretrained(str(staging))
    staging.replace(final)
    return final
