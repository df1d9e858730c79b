"""What a TTRL step trains on: the selection's reward (`majority`, TTRL itself) or a control reward at the
same steps, tokens and settings, so a gain can be read beside what a signal-free reward gives the same model
(Spurious Rewards, arXiv 2506.10947: random and format-only rewards lift some models by double digits).

Each reward is a small registered function over one prompt's vote (TRL-style: keyword arguments, `**_`
ignored) returning one reward per kept sample. None of them can see a reference: they get the vote, which is
label-free, and an RNG.

- `majority`: agreement with the selected class (`vote.py`).
- `random`: Bernoulli(p) per sample, independent of the sample. p is `random_p`, else the running mean of
  the majority reward this policy would have earned so far (the vote is still computed, and logged), so the
  reward's scale matches TTRL's.
- `format`: 1 for a well-formed answer (math: an answer was extracted; code: a program that compiles), else 0.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from testtime.core.registry import Registry
from testtime.core.results import TTRLVote

REWARDS: Registry[list[float]] = Registry("ttrl reward")


@REWARDS.register("majority", help="TTRL: agreement with the selected class (the pseudo-label)")
def majority_reward(*, vote: TTRLVote, **_: object) -> list[float]:
    return list(vote.rewards)


@REWARDS.register("random", help="control: Bernoulli(p) per sample, independent of the answer")
def random_reward(*, vote: TTRLVote, rng: random.Random, p: float, **_: object) -> list[float]:
    return [1.0 if rng.random() < p else 0.0 for _ in vote.kept]


@REWARDS.register("format", help="control: 1 for a well-formed answer (extracted; code that compiles)")
def format_reward(*, vote: TTRLVote, **_: object) -> list[float]:
    return [0.0 if i in vote.abstained else 1.0 for i in vote.kept]


@dataclass
class TrainedReward:
    """The configured reward over a run: remembers the majority reward's running mean for `random`."""

    kind: str = "majority"
    random_p: float | None = None
    seed: int = 0
    majority_sum: float = 0.0
    majority_count: int = 0

    def __post_init__(self) -> None:
        self.function = REWARDS.get(self.kind)
        self.rng = random.Random(f"ttrl-{self.kind}-{self.seed}")  # its own stream: the vote's draws are unchanged

    def p(self) -> float:
        if self.random_p is not None:
            return self.random_p
        return self.majority_sum / self.majority_count if self.majority_count else 0.5

    def rewards(self, votes: list[TTRLVote]) -> list[list[float]]:
        """One step's rewards, prompt by prompt; the running mean first takes this step's majority rewards."""
        for vote in votes:
            self.majority_sum += sum(vote.rewards)
            self.majority_count += len(vote.rewards)
        p = self.p()
        return [self.function(vote=vote, rng=self.rng, p=p) for vote in votes]

    def apply(self, votes: list[TTRLVote]) -> list[TTRLVote]:
        """The votes as trained: a control's rewards replace the vote's, which stay beside as
        `majority_rewards` (what TTRL would have given)."""
        trained = self.rewards(votes)
        if self.kind == "majority":
            return votes
        return [
            v.model_copy(update={"rewards": tuple(r), "majority_rewards": v.rewards})
            for v, r in zip(votes, trained, strict=True)
        ]
