"""TTRL's reward function for TRL's GRPOTrainer, and the channel that carries its votes to the step log.

TRL calls a reward function once per generation batch with every completion of this process, each prompt's
`num_generations` completions consecutive (reference ttrl.md §13), so the reward step (`vote.py`) runs
there on groups of N_train. When N_vote > N_train the missing votes come with the rollouts (`extra_votes`)
or are sampled from the current policy, so the class is selected among N_vote samples while GRPO trains on
N_train, as in TTRL. Every rollout and extra vote is one `model_call` line in the ledger, and the reward's
sandbox time (code) one `sandbox` line. The votes, as trained, go into a `StepBuffer` that the trainer's
callback empties into `steps.jsonl` at the next optimiser step: the one place the two meet.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from testtime.core.adaptive import Adaptive
from testtime.core.jsonl import repair_tail
from testtime.core.ledger import Ledger, LedgerEntry
from testtime.core.oracle import LabelOracle
from testtime.core.records import Completion, Message, Problem, TokenStats
from testtime.core.results import TTRLKnowledge, TTRLStep, TTRLVote, read_steps
from testtime.methods import make_candidates
from testtime.methods.ttrl.knowledge import RolloutKnowledge
from testtime.methods.ttrl.monitor import LabelHistory, vote_stats
from testtime.methods.ttrl.recipe import TTRLSettings
from testtime.methods.ttrl.rewards import TrainedReward
from testtime.methods.ttrl.vote import keep, vote
from testtime.selectors import SelectionContext, Selector

T = TypeVar("T")
RunAsync = Callable[[Awaitable[T]], T]  # how a synchronous caller runs a coroutine (the run's loop, or its own)


@dataclass
class StepBuffer:
    """Votes of the last generation batch (as trained), their label-free statistics and the rollout tokens,
    from the reward function to the callback that writes the next step line."""

    votes: list[TTRLVote] = field(default_factory=list)
    stats: dict[str, float] = field(default_factory=dict)
    rollout_tokens: int = 0
    knowledge: TTRLKnowledge | None = None  # knowledge=trt: the last step's reflections, taken with its votes

    def put(self, votes: list[TTRLVote], tokens: int) -> None:
        self.votes += votes
        self.stats = vote_stats(votes)
        self.rollout_tokens += tokens

    def take(self) -> tuple[list[TTRLVote], dict[str, float], int]:
        """The pending votes (once: the next step gets none), the latest statistics, the tokens since."""
        votes, tokens = self.votes, self.rollout_tokens
        self.votes, self.rollout_tokens = [], 0
        return votes, self.stats, tokens


def resume_steps(path: Path, history: LabelHistory) -> int:
    """Reload label history from an earlier process's steps.jsonl; returns the last optimiser step written."""
    repair_tail(path)
    last = 0
    for record in read_steps(path):
        last = max(last, record.step)
        for vote_record in record.votes:
            history.last[vote_record.problem_id] = vote_record.label_key
    return last


def append_step(path: Path, record: TTRLStep) -> None:
    with path.open("a", encoding="utf-8") as f:
        f.write(record.model_dump_json(exclude_none=True) + "\n")


class VoteReward:
    """TRL reward function: vote each prompt's group (plus extra votes), reward agreement with the selection."""

    __name__ = "ttrl_vote"

    def __init__(
        self,
        settings: TTRLSettings,
        problems: Mapping[str, Problem],
        selector: Selector,
        context: Callable[[Problem], SelectionContext],
        *,
        ledger: Ledger,
        model_name: str,
        buffer: StepBuffer | None = None,
        history: LabelHistory | None = None,
        seed: int = 0,
        run_async: RunAsync[Any] = asyncio.run,
        oracle: LabelOracle | None = None,
        vote_stop: Adaptive | None = None,
    ) -> None:
        self.settings = settings
        self.vote_stop = vote_stop  # --adaptive: the rule that lets a settled group skip its vote-only samples
        self.policy = settings.vote_policy()
        self.problems, self.selector, self.context = problems, selector, context
        self.ledger, self.model_name = ledger, model_name
        self.buffer = buffer or StepBuffer()
        self.history = history or LabelHistory()
        self.rng = random.Random(seed)
        self.trained = TrainedReward(settings.reward, settings.random_p, seed, oracle, settings.novelty_embedder)
        self.run_async = run_async
        # Set by the trainer when N_vote > N_train: k more (text, tokens) samples per prompt from the policy.
        self.extra_votes: Callable[[list[Any], int], list[list[tuple[str, int]]]] | None = None
        self.count_prompt_tokens: Callable[[list[dict[str, str]]], int] = lambda _: 0
        self.knowledge: RolloutKnowledge | None = None  # knowledge=trt: each prompt's list, grown after its vote

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        completion_ids: Sequence[Sequence[int]],
        problem_id: Sequence[str],
        trainer_state: Any = None,
        extra_votes: Sequence[Sequence[tuple[str, int]]] | None = None,
        token_stats: Sequence[TokenStats] | None = None,
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
        if extra_votes is not None:  # drawn with the rollouts (shared_rollouts), one list per row
            extras = [extra_votes[start] for start in starts]
        elif extra_needed and self.extra_votes:
            extras = self._extras([prompts[start] for start in starts], problem_id, completions, starts, extra_needed)
        else:
            extras = [[] for _ in starts]
        step = int(getattr(trainer_state, "global_step", 0)) + 1
        # TRL trains on its own completions: they take the kept places among the votes, the extras the others
        kept = [keep(group + len(extras[g]), self.policy, self.rng) for g in range(len(starts))]
        texts = [
            _arrange(
                [completion_text(c) for c in completions[start : start + group]], [t for t, _ in extras[g]], kept[g]
            )
            for g, start in enumerate(starts)
        ]
        votes = self.run_async(self._votes([problem_id[start] for start in starts], texts, kept))
        votes = [
            v.model_copy(
                update={
                    "flipped": self.history.flipped(v.problem_id, v.label_key),
                    "token_stats": tuple(token_stats[start : start + group]) if token_stats else (),
                }
            )
            for v, start in zip(votes, starts, strict=True)
        ]
        votes = self.trained.apply(votes)  # the vote's own rewards, or a control's
        if self.knowledge is not None:
            self.buffer.knowledge = self.run_async(self._reflect(votes, texts, step))
        tokens = 0
        for g, (start, prompt_vote) in enumerate(zip(starts, votes, strict=True)):
            pid = prompt_vote.problem_id
            prompt_tokens = self.count_prompt_tokens(_messages(prompts[start]))
            for i, ids in enumerate(completion_ids[start : start + group]):
                tokens += self._ledger_rollout(pid, i, step, prompt_tokens, len(ids), "ttrl_rollout")
            for i, (_, count) in enumerate(extras[g]):
                tokens += self._ledger_rollout(pid, group + i, step, prompt_tokens, count, "ttrl_vote")
            if prompt_vote.sandbox_seconds:
                self.ledger.record(
                    LedgerEntry(
                        kind="sandbox",
                        problem_id=pid,
                        purpose="ttrl_reward",
                        seconds=prompt_vote.sandbox_seconds,
                        step=step,
                    )
                )
        self.buffer.put(votes, tokens)
        return [r for v in votes for r in v.rewards]

    def _extras(
        self, prompts: list[Any], problem_id: Sequence[str], completions: Sequence[Any], starts: range, needed: int
    ) -> list[list[tuple[str, int]]]:
        """The vote-only samples of each prompt's group, where they are a request of their own (`use_vllm`, or
        transformers with --adaptive): all `needed` of them, or (with --adaptive) none for a group whose trained
        samples already settle the vote at its N_vote (the trained samples are GRPO's, never cut). Without
        --adaptive, on transformers, `shared_rollouts` drew them already, with the trained ones."""
        assert self.extra_votes is not None
        group, wanted = self.settings.n_train, list(range(len(starts)))
        if self.vote_stop is not None:
            wanted = []
            for g, start in enumerate(starts):
                problem = self.problems[problem_id[start]]
                texts = [completion_text(c) for c in completions[start : start + group]]
                answers = [c.answer for c in make_candidates(problem, [Completion(text=t) for t in texts])]
                classes = self.vote_stop.counted(answers, self.selector.vote_classes(problem, answers) or [])
                if self.vote_stop.verdict(classes, group, group + needed) is None:
                    wanted.append(g)
        drawn = iter(self.extra_votes([prompts[g] for g in wanted], needed) if wanted else [])
        return [next(drawn) if g in wanted else [] for g in range(len(starts))]

    async def _reflect(self, votes: list[TTRLVote], texts: list[list[str]], step: int) -> TTRLKnowledge:
        """knowledge=trt: one reflection per prompt over what its vote rejected; the step's counts."""
        assert self.knowledge is not None
        knowledge = self.knowledge
        counts = await asyncio.gather(
            *(
                knowledge.reflect(
                    self.problems[v.problem_id],
                    t,
                    [i for i in range(len(t)) if v.vote_rewards and v.vote_rewards[i] > 0],
                    step,
                )
                for v, t in zip(votes, texts, strict=True)
            )
        )
        return TTRLKnowledge(
            asked=sum(c.asked for c in counts),
            parsed=sum(c.parsed for c in counts),
            entered=sum(c.entered for c in counts),
        )

    async def _votes(self, problem_ids: list[str], texts: list[list[str]], kept: list[list[int]]) -> list[TTRLVote]:
        return list(
            await asyncio.gather(
                *(
                    vote(self.problems[p], t, self.selector, self.context(self.problems[p]), self.policy, self.rng, k)
                    for p, t, k in zip(problem_ids, texts, kept, strict=True)
                )
            )
        )

    def _ledger_rollout(self, pid: str, index: int, step: int, prompt_tokens: int, tokens: int, purpose: str) -> int:
        self.ledger.record(
            LedgerEntry(
                model=self.model_name,
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
        return prompt_tokens + tokens


def _arrange(trained: list[str], extras: list[str], kept: list[int]) -> list[str]:
    """The votes in order: trained samples at the kept indices, extra votes filling the rest."""
    places, trained_left, extras_left = set(kept), iter(trained), iter(extras)
    return [next(trained_left) if i in places else next(extras_left) for i in range(len(trained) + len(extras))]


def completion_text(completion: Any) -> str:
    """A completion as plain text: TRL passes conversational completions as a list of messages."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content", "") for m in completion if isinstance(m, dict))


def _messages(prompt: Any) -> list[dict[str, str]]:
    return prompt if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}]


def as_chat(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]
