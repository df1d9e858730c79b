"""What a TTRL step trains on, chosen by `--method-opt reward=NAME`: the selection's reward (`majority`, TTRL
itself), a label-free variant of it, a control at the same steps, tokens and settings (Spurious Rewards, arXiv
2506.10947: random and format-only rewards lift some models by double digits), or the `oracle` upper bound.

Each reward is a small registered function over one prompt's vote (TRL-style: keyword arguments, `**_`
ignored) returning one reward per kept sample. They get the vote, which is label-free, an RNG and their own
options; only `oracle` gets a `LabelOracle`, which the runner opens for it alone (`run/build.py`).

- `majority`: agreement with the selected class (`vote.py`).
- `novelty`: EVOL-RL (arXiv 2509.15194), "majority selects, novelty varies", as its released reward manager
  computes it: every one of the N_vote samples is scored (the trained ones take theirs). A sample with no answer
  gets −1 and takes no part (if at most one sample is left, every sample gets −1). For the others, the text after
  `</think>` is embedded (its tail, where the answer is) and similarity is the cosine clipped to [0, 1]; novelty
  u = 1 − (½·s̄ + ½·s_max), s̄ the mean similarity to the other samples on its side (agreeing with the vote or not;
  a side of one uses every other sample), s_max the largest similarity to any other sample; u is min-max scaled
  within each side: the majority earn 0.5 + 0.5·ũ ∈ [0.5, 1], the others −1 + 0.5·ũ ∈ [−1, −0.5]; a side
  without spread earns its midpoint (0.75, −0.75), a side of one its best (1.0, −0.5). The embedder is
  `novelty_embedder` (default the embedded `smollm2-135m`, mean-pooled; the paper used Qwen3-Embedding-4B).
  `novelty_lexical` is the same rule on word-set overlap, needing no second model: it departs from the paper.
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
- `matrix` (code, with `--selector-opt rank=matrix`; ZeroCoder's idea, the reward from the code × test matrix):
  a sample's score on the tests as the matrix weighs them (`selectors/matrix.py`: tests no program passes weigh 0),
  over the best sample's; 0 for a sample with no program.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from testtime.core.oracle import LabelOracle
from testtime.core.records import TokenStats
from testtime.core.registry import Registry
from testtime.core.results import TTRLVote

REWARDS: Registry[list[float]] = Registry("ttrl reward")
Embed = Callable[[list[str]], list[list[float]]]  # texts → unit vectors (`models/embedding.py`)
NOVELTY_MIX = 0.5  # EVOL-RL's α: the same-side mean similarity's weight against the global max
DEFAULT_EMBEDDER = "smollm2-135m"  # the embedded model, offline (EVOL-RL's was Qwen3-Embedding-4B)


@REWARDS.register("majority", help="TTRL: agreement with the selected class (the pseudo-label)")
def majority_reward(*, vote: TTRLVote, **_: object) -> list[float]:
    return list(vote.rewards)


@REWARDS.register("random", help="control: Bernoulli(p) per sample, independent of the answer")
def random_reward(*, vote: TTRLVote, rng: random.Random, p: float, **_: object) -> list[float]:
    return [1.0 if rng.random() < p else 0.0 for _ in vote.kept]


@REWARDS.register("format", help="control: 1 for a well-formed answer (extracted; code that compiles)")
def format_reward(*, vote: TTRLVote, **_: object) -> list[float]:
    return [0.0 if i in vote.abstained else 1.0 for i in vote.kept]


@REWARDS.register("matrix", help="code, rank=matrix: a sample's score on the consensus tests, over the best's")
def matrix_reward(*, vote: TTRLVote, **_: object) -> list[float]:
    best = max(vote.scores, default=0.0)
    return [vote.scores[i] / best if best > 0 and i not in vote.abstained else 0.0 for i in vote.kept]


@REWARDS.register("novelty", help="EVOL-RL: majority selects, novelty varies (embedding cosines, every vote scored)")
def novelty_reward(*, vote: TTRLVote, embed: Embed | None = None, **_: object) -> list[float]:
    if embed is None:
        raise RuntimeError("the novelty reward compares embeddings: it needs an embedder (novelty_embedder)")
    return _kept(vote, evol_rl_rewards(_embedding_similarity(_after_think(vote), embed), *_sides(vote)))


@REWARDS.register("novelty_lexical", help="EVOL-RL's rule on word-set overlap, no embedder (departs from the paper)")
def novelty_lexical_reward(*, vote: TTRLVote, **_: object) -> list[float]:
    return _kept(vote, evol_rl_rewards(_word_similarity(_after_think(vote)), *_sides(vote)))


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


def _every_vote(vote: TTRLVote) -> tuple[list[bool], list[int]]:
    """Each vote's agreement with the label and the trained samples' places among the votes. A vote built with
    only its kept samples (a plugin's) is scored over those."""
    if vote.vote_rewards:
        return [r > 0 for r in vote.vote_rewards], list(vote.kept)
    return [r > 0 for r in vote.rewards], list(range(len(vote.kept)))


def _sides(vote: TTRLVote) -> tuple[list[bool], list[bool]]:
    agree, _ = _every_vote(vote)
    if vote.vote_rewards:
        answered = [i not in vote.abstained for i in range(len(agree))]
    else:
        answered = [i not in vote.abstained for i in vote.kept]
    return agree, answered


def _kept(vote: TTRLVote, rewards: list[float]) -> list[float]:
    _, kept = _every_vote(vote)
    return [rewards[i] for i in kept]


def _after_think(vote: TTRLVote) -> list[str]:
    """Every scored sample's text after its last `</think>` (all of it where there is none), as EVOL-RL compares."""
    agree, _ = _every_vote(vote)
    texts = list(vote.texts) if len(vote.texts) == len(agree) else [a or "" for a in (vote.votes or vote.answers)]
    return [t.rpartition("</think>")[2] if "</think>" in t else t for t in texts]


def _embedding_similarity(texts: list[str], embed: Embed) -> np.ndarray:
    vectors = np.asarray(embed(texts), dtype=float)
    norms = np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-8)
    unit = vectors / norms
    return np.clip(unit @ unit.T, 0.0, 1.0)  # EVOL-RL clips cosines to [0, 1]


def _word_similarity(texts: list[str]) -> np.ndarray:
    words = [set(t.lower().split()) for t in texts]
    size = len(words)
    similarity = np.ones((size, size))
    for i in range(size):
        for j in range(i + 1, size):
            union = words[i] | words[j]
            similarity[i, j] = similarity[j, i] = len(words[i] & words[j]) / len(union) if union else 1.0
    return similarity


def evol_rl_rewards(similarity: np.ndarray, agree: Sequence[bool], answered: Sequence[bool]) -> list[float]:
    """EVOL-RL's reward of every sample, from their pairwise similarity (in [0, 1]), agreement with the vote and
    whether each gave an answer (see the module's docstring for the rule)."""
    count = len(agree)
    if count <= 1:
        return [1.0 if a else 0.0 for a in agree]  # nothing to compare: the vote's reward
    scored = [i for i in range(count) if answered[i]]
    rewards = [-1.0] * count
    if len(scored) <= 1:
        return rewards
    sub = similarity[np.ix_(scored, scored)]
    for place, reward in zip(scored, _side_rewards(sub, [agree[i] for i in scored]), strict=True):
        rewards[place] = reward
    return rewards


def _side_rewards(similarity: np.ndarray, agree: list[bool]) -> list[float]:
    count = len(agree)
    novelty = np.empty(count)
    for i in range(count):
        others = [j for j in range(count) if j != i]
        side = [j for j in others if agree[j] == agree[i]]
        mean_similarity = similarity[i, side].mean() if side else similarity[i, others].mean()
        novelty[i] = 1.0 - (NOVELTY_MIX * mean_similarity + (1 - NOVELTY_MIX) * similarity[i, others].max())
    rewards = np.empty(count)
    for flag, (floor, alone) in ((True, (0.5, 1.0)), (False, (-1.0, -0.5))):
        members = [i for i in range(count) if agree[i] == flag]
        if len(members) == 1:
            rewards[members[0]] = alone
        elif members:
            u = novelty[members]
            low, high = u.min(), u.max()
            rewards[members] = floor + 0.5 * (u - low) / (high - low) if high > low else floor + 0.25
    return rewards.tolist()


@dataclass
class TrainedReward:
    """The configured reward over a run: remembers the majority reward's running mean for `random`."""

    kind: str = "majority"
    random_p: float | None = None
    seed: int = 0
    oracle: LabelOracle | None = None  # opened by the runner for `oracle` alone
    embedder: str | None = None  # novelty: the model whose embeddings compare samples (None: the embedded one)
    majority_sum: float = 0.0
    majority_count: int = 0

    def __post_init__(self) -> None:
        self.function = REWARDS.get(self.kind)
        self.rng = random.Random(f"ttrl-{self.kind}-{self.seed}")  # its own stream: the vote's draws are unchanged
        self.embed: Embed | None = None
        if self.kind == "novelty":
            from testtime.models.embedding import MeanPooledEmbedder

            self.embed = MeanPooledEmbedder(self.embedder or DEFAULT_EMBEDDER)

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
