"""What a TTRL step trains on, chosen by `--method-opt reward=NAME`: the selection's reward (`majority`, TTRL
itself), a label-free variant of it, a control at the same steps, tokens and settings (Spurious Rewards, arXiv
2506.10947: random and format-only rewards lift some models by double digits), or the `oracle` upper bound.

Each reward is a small registered function over one prompt's vote (TRL-style: keyword arguments, `**_`
ignored) returning one reward per kept sample. They get the vote, which is label-free, an RNG and their own
options; only `oracle` gets a `LabelOracle`, which the runner opens for it alone (`run/build.py`).

- `majority`: agreement with the selected class (`vote.py`).
- `novelty`: EVOL-RL (arXiv 2509.15194), "majority selects, novelty varies". A sample's novelty is
  u = 1 − (α·s̄ + (1 − α)·s_max), s̄ its mean similarity to the other samples on its side (the majority, or
  the other answered samples), s_max its largest similarity to any other answered sample, α = 0.5; u is min-max
  scaled within each side to ũ; the majority earn 0.5 + 0.5·ũ ∈ [0.5, 1], the other answered samples
  −1 + 0.5·ũ ∈ [−1, −0.5], and a sample with no answer a flat −1. Similarity is the paper's embedding cosine
  with `novelty_embedder=MODEL` (a transformers folder or `smollm2-135m`, mean-pooled: `models/embedding.py`);
  by default the word-set Jaccard of the two texts, a lexical stand-in that needs no second model (a deviation).
- `self_certainty` (Intuitor, arXiv 2505.19590): the sample's mean KL(uniform ‖ p) under the policy that wrote
  it; `entropy` (RENT): its negative mean token entropy. Both from one forward pass over the rollouts
  (`models/confidence.py`), p being the distribution at the rollouts' sampling temperature (softmax(logits/T)),
  the one each sample was drawn from (the papers read the policy at T = 1, which is the same where T = 1); on
  TRL's vLLM rollouts they are refused (no per-token distribution there).
- `oracle`: 1 for a sample the sealed reference grades correct, else 0 — TTRL's "RL (leakage)" upper bound
  (its Figure 7), the same RL with the true labels. A run trained on it says `uses_labels: true` everywhere.
- `random`: Bernoulli(p) per sample, independent of the sample. p is `random_p`, else the running mean of
  the majority reward this policy would have earned so far (the vote is still computed, and logged), so the
  reward's scale matches TTRL's.
- `format`: 1 for a well-formed answer (math: an answer was extracted; code: a program that compiles), else 0.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from testtime.core.oracle import LabelOracle
from testtime.core.records import TokenStats
from testtime.core.registry import Registry
from testtime.core.results import TTRLVote

REWARDS: Registry[list[float]] = Registry("ttrl reward")
Embed = Callable[[list[str]], list[list[float]]]  # texts → unit vectors (`models/embedding.py`)
NOVELTY_MIX = 0.5  # EVOL-RL's α: the same-side mean similarity's weight against the global max


@REWARDS.register("majority", help="TTRL: agreement with the selected class (the pseudo-label)")
def majority_reward(*, vote: TTRLVote, **_: object) -> list[float]:
    return list(vote.rewards)


@REWARDS.register("random", help="control: Bernoulli(p) per sample, independent of the answer")
def random_reward(*, vote: TTRLVote, rng: random.Random, p: float, **_: object) -> list[float]:
    return [1.0 if rng.random() < p else 0.0 for _ in vote.kept]


@REWARDS.register("format", help="control: 1 for a well-formed answer (extracted; code that compiles)")
def format_reward(*, vote: TTRLVote, **_: object) -> list[float]:
    return [0.0 if i in vote.abstained else 1.0 for i in vote.kept]


@REWARDS.register("novelty", help="EVOL-RL: majority selects, novelty varies (word overlap in place of embeddings)")
def novelty_reward(*, vote: TTRLVote, embed: Embed | None = None, **_: object) -> list[float]:
    answered = [i not in vote.abstained for i in vote.kept]
    agree = [r > 0 for r in vote.rewards]
    texts = vote.texts or tuple(a or "" for a in vote.answers)
    novelty = _scaled_novelty(_similarity(texts, embed), agree, answered)
    return [(0.5 if a else -1.0) + 0.5 * n if ok else -1.0 for a, n, ok in zip(agree, novelty, answered, strict=True)]


@REWARDS.register("self_certainty", help="Intuitor: mean KL(uniform ‖ p) of the sample's tokens under the policy")
def self_certainty_reward(*, vote: TTRLVote, **_: object) -> list[float]:
    return [s.self_certainty or 0.0 for s in _stats(vote)]


@REWARDS.register("entropy", help="RENT: the negative mean token entropy of the sample under the policy")
def entropy_reward(*, vote: TTRLVote, **_: object) -> list[float]:
    return [-(s.entropy_mean or 0.0) for s in _stats(vote)]


def _stats(vote: TTRLVote) -> tuple[TokenStats, ...]:
    if len(vote.token_stats) != len(vote.kept):
        raise RuntimeError(
            "a confidence reward needs each trained sample's token statistics (rollouts on transformers)"
        )
    return vote.token_stats


@REWARDS.register("oracle", help="upper bound: 1 if the sealed reference grades the sample correct (uses labels)")
def oracle_reward(*, vote: TTRLVote, oracle: LabelOracle | None = None, **_: object) -> list[float]:
    if oracle is None:
        raise RuntimeError("the oracle reward needs the label channel, which only the runner opens")
    return [1.0 if oracle.correct(vote.problem_id, answer) else 0.0 for answer in vote.answers]


def _similarity(texts: tuple[str, ...], embed: Embed | None) -> Callable[[int, int], float]:
    """Pairwise similarity of the samples: the cosine of their embeddings (`novelty_embedder`), else the
    word-set Jaccard of their texts (the offline stand-in)."""
    if embed is not None:
        vectors = np.asarray(embed(list(texts)), dtype=float)
        cosines = vectors @ vectors.T  # every pair once, not a Python loop over the dimensions per pair
        return lambda i, j: float(cosines[i, j])
    words = [set(t.lower().split()) for t in texts]

    def jaccard(i: int, j: int) -> float:
        union = words[i] | words[j]
        return len(words[i] & words[j]) / len(union) if union else 1.0

    return jaccard


def _scaled_novelty(similarity: Callable[[int, int], float], agree: list[bool], answered: list[bool]) -> list[float]:
    """EVOL-RL's novelty of each answered sample, min-max scaled within its side (the majority, or the other
    answered samples): 1 − (α·mean similarity to its own side + (1 − α)·max similarity to any other answered
    sample), α = `NOVELTY_MIX`; 0.5 where a side has one member or no spread. No-answer samples take no part."""
    count = len(agree)
    sides = {flag: [i for i in range(count) if answered[i] and agree[i] == flag] for flag in (True, False)}
    everyone = [i for i in range(count) if answered[i]]
    raw = [0.0] * count
    for i in everyone:
        same = [similarity(i, j) for j in sides[agree[i]] if j != i]
        others = [similarity(i, j) for j in everyone if j != i]
        mixed = NOVELTY_MIX * (sum(same) / len(same) if same else 0.0) + (1 - NOVELTY_MIX) * max(others, default=0.0)
        raw[i] = 1.0 - mixed
    scaled = [0.5] * len(raw)
    for members in sides.values():
        low, high = min((raw[i] for i in members), default=0.0), max((raw[i] for i in members), default=0.0)
        if high > low:
            for i in members:
                scaled[i] = (raw[i] - low) / (high - low)
    return scaled


@dataclass
class TrainedReward:
    """The configured reward over a run: remembers the majority reward's running mean for `random`."""

    kind: str = "majority"
    random_p: float | None = None
    seed: int = 0
    oracle: LabelOracle | None = None  # opened by the runner for `oracle` alone
    embedder: str | None = None  # novelty: the model whose embeddings compare samples (None: word overlap)
    majority_sum: float = 0.0
    majority_count: int = 0

    def __post_init__(self) -> None:
        self.function = REWARDS.get(self.kind)
        self.rng = random.Random(f"ttrl-{self.kind}-{self.seed}")  # its own stream: the vote's draws are unchanged
        self.embed: Embed | None = None
        if self.embedder is not None and self.kind == "novelty":
            from testtime.models.embedding import MeanPooledEmbedder

            self.embed = MeanPooledEmbedder(self.embedder)

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
        return [self.function(vote=vote, rng=self.rng, p=p, oracle=self.oracle, embed=self.embed) for vote in votes]

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
