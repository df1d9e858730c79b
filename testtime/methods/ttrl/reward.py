"""TTRL's reward function for TRL's GRPOTrainer, and the per-step log it feeds.

TRL calls a reward function once per generation batch with every completion of this process, each prompt's
`num_generations` completions consecutive (reference ttrl.md §13), so the vote step runs there on groups of
N_train. When N_vote > N_train the reward function samples the missing votes from the current policy, so the
label is voted by N_vote answers while GRPO trains on N_train, as in TTRL. Every rollout and extra vote is
one `model_call` line in the ledger.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testtime.core.answers import extract_answer
from testtime.core.ledger import Ledger, LedgerEntry
from testtime.core.records import Message
from testtime.methods.ttrl.monitor import LabelHistory, vote_stats
from testtime.methods.ttrl.settings import TTRLSettings
from testtime.methods.ttrl.vote import PromptVote, VotePolicy, vote_step


@dataclass
class StepLog:
    """What the reward function saw since the last log line, and where both go."""

    path: Path
    ledger: Ledger
    model_name: str
    history: LabelHistory = field(default_factory=LabelHistory)
    pending: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, float] = field(default_factory=dict)
    rollout_tokens: int = 0

    def resume(self) -> int:
        """Reload label history from an earlier process; returns the last optimiser step written."""
        last = 0
        for record in read_steps(self.path):
            last = max(last, int(record.get("step", 0)))
            for vote in record.get("votes", []):
                self.history.last[vote["problem_id"]] = vote["label_key"]
        return last

    def write(self, record: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def read_steps(path: Path) -> list[dict[str, Any]]:
    """The records of a steps.jsonl (none if absent); a line torn by a kill is skipped."""
    records = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
    return records


class VoteReward:
    """TRL reward function: vote each prompt's group (plus extra votes), reward agreement with the label."""

    __name__ = "ttrl_vote"

    def __init__(self, settings: TTRLSettings, log: StepLog, seed: int = 0) -> None:
        self.settings = settings
        self.policy = VotePolicy(
            n_train=settings.n_train, tie_policy=settings.tie_policy, min_majority_ratio=settings.min_majority_ratio
        )
        self.log = log
        self.rng = random.Random(seed)
        # Set by the trainer when N_vote > N_train: k more (text, tokens) samples per prompt from the policy.
        self.extra_votes: Callable[[list[Any], int], list[list[tuple[str, int]]]] | None = None
        self.count_prompt_tokens: Callable[[list[dict[str, str]]], int] = lambda _: 0

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Sequence[int]],
        problem_id: Sequence[str],
        trainer_state: Any = None,
        **kwargs: Any,
    ) -> list[float]:
        group = self.settings.n_train
        if len(completions) % group:
            raise RuntimeError(f"TRL passed {len(completions)} completions, not a multiple of the group {group}")
        starts = range(0, len(completions), group)
        for start in starts:
            if len(set(problem_id[start : start + group])) != 1:
                raise RuntimeError("a TRL generation group mixes prompts; the vote needs whole groups")
        extra_needed = self.settings.n_vote - group
        group_prompts = [prompts[start] for start in starts]
        extras = self.extra_votes(group_prompts, extra_needed) if extra_needed and self.extra_votes else []
        step = int(getattr(trainer_state, "global_step", 0)) + 1
        rewards: list[float] = []
        votes: list[PromptVote] = []
        flips: list[bool | None] = []
        for g, start in enumerate(starts):
            texts = [_text(c) for c in completions[start : start + group]]
            extra = extras[g] if extras else []
            answers = [extract_answer(t) for t in texts] + [extract_answer(t) for t, _ in extra]
            vote = vote_step(answers, self.policy, self.rng)
            pid = problem_id[start]
            flips.append(self.log.history.flipped(pid, vote.label_key))
            votes.append(vote)
            rewards.extend(vote.rewards)
            self.log.pending.append(
                {
                    "problem_id": pid,
                    "label": vote.label,
                    "label_key": vote.label_key,
                    "majority_ratio": vote.majority_ratio,
                    "margin": vote.margin,
                    "tie": vote.tie,
                    "skipped": vote.skipped,
                    "answers": [answers[i] for i in vote.kept],
                    "rewards": vote.rewards,
                    "flipped": flips[-1],
                }
            )
            prompt_tokens = self.count_prompt_tokens(_messages(prompts[start]))
            for i, ids in enumerate(completion_ids[start : start + group]):
                self._ledger_rollout(pid, i, step, prompt_tokens, len(ids), "ttrl_rollout")
            for i, (_, tokens) in enumerate(extra):
                self._ledger_rollout(pid, group + i, step, prompt_tokens, tokens, "ttrl_vote")
        self.log.stats = vote_stats(votes, flips)
        return rewards

    def _ledger_rollout(self, pid: str, index: int, step: int, prompt_tokens: int, tokens: int, purpose: str) -> None:
        self.log.rollout_tokens += prompt_tokens + tokens
        self.log.ledger.record(
            LedgerEntry(
                model=self.log.model_name,
                problem_id=pid,
                purpose=purpose,
                sample_index=index,
                step=step,
                attempts=1,
                prompt_tokens=prompt_tokens,
                completion_tokens=tokens,
                cost_usd=0.0,
            )
        )


def _text(completion: Any) -> str:
    """A completion as plain text: TRL passes conversational completions as a list of messages."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content", "") for m in completion if isinstance(m, dict))


def _messages(prompt: Any) -> list[dict[str, str]]:
    return prompt if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}]


def as_chat(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]
