"""Label-free training signals for TTRL: per-step statistics of the votes, pseudo-label flips, and the
collapse alarm. Nothing here can see a reference; the audit metrics (label and reward accuracy) are computed
by the scorer from the vote records this module's callers write.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean
from typing import Any

from testtime.core.results import TTRLVote, read_steps


@dataclass
class LabelHistory:
    """The last pseudo-label key of each prompt, to measure how often a prompt's label flips between visits."""

    last: dict[str, str | None] = field(default_factory=dict)

    def flipped(self, problem_id: str, key: str | None) -> bool | None:
        """True/False on a revisit, None on a prompt's first vote."""
        before = self.last.get(problem_id, "<unseen>")
        self.last[problem_id] = key
        return None if before == "<unseen>" else before != key


def vote_stats(votes: Sequence[TTRLVote]) -> dict[str, float]:
    """One rollout step's label-free vote metrics (TTRL's names where they exist), from the votes as trained:
    `pseudo_reward` is the vote's reward, `train_reward` what was trained on (they differ under a control)."""
    revisits = [v.flipped for v in votes if v.flipped is not None]
    pseudo = [r for v in votes for r in (v.rewards if v.majority_rewards is None else v.majority_rewards)]
    trained_rewards = [r for v in votes for r in v.rewards]
    return {
        "majority_ratio": mean(v.majority_ratio for v in votes),
        "vote_margin": mean(v.margin for v in votes),
        "no_answer_rate": mean(v.no_answer_rate for v in votes),
        "skipped_prompts": float(sum(v.skipped is not None for v in votes)),
        "tie_rate": mean(v.tie for v in votes),
        "pseudo_reward": mean(pseudo) if pseudo else 0.0,
        "train_reward": mean(trained_rewards) if trained_rewards else 0.0,
        "distinct_classes": mean(v.classes for v in votes),  # code: distinct behaviours
    } | ({"label_flip_rate": mean(revisits)} if revisits else {})  # only once prompts are revisited


@dataclass
class CollapseAlarm:
    """Fires on either of two patterns over `window` consecutive steps.

    Collapse: the policy has become certain and terse at once: the majority ratio saturates, token entropy
    falls to a fraction of its starting value, and responses shrink. Each alone is normal TTRL progress;
    together they are the rise-then-fall pattern URLVR reports.
    Churn: pseudo-labels flip on at least `flips_at_least` of revisited prompts, step after step: the reward
    points a different way at each visit, so training follows noise (TTRL-Guard's flip-rate signal)."""

    window: int = 5
    ratio_at_least: float = 0.98
    entropy_fraction: float = 0.1
    length_fraction: float = 0.6
    flips_at_least: float = 0.5
    history: list[dict[str, float]] = field(default_factory=list)
    flips: list[float] = field(default_factory=list)

    def update(self, stats: Mapping[str, Any]) -> str | None:
        if stats.get("label_flip_rate") is not None:
            self.flips.append(float(stats["label_flip_rate"]))
            recent_flips = self.flips[-self.window :]
            if len(recent_flips) == self.window and mean(recent_flips) >= self.flips_at_least:
                return (
                    f"label churn: pseudo-labels flipped on {mean(recent_flips):.0%} of revisited prompts over the "
                    f"last {self.window} steps"
                )
        needed = ("majority_ratio", "entropy", "mean_length")
        if any(stats.get(k) is None for k in needed):
            return None
        self.history.append({k: float(stats[k]) for k in needed})
        if len(self.history) < 2 * self.window:
            return None
        first, recent = self.history[: self.window], self.history[-self.window :]

        def avg(rows: list[dict[str, float]], key: str) -> float:
            return mean(r[key] for r in rows)

        if (
            avg(recent, "majority_ratio") >= self.ratio_at_least
            and avg(recent, "entropy") <= self.entropy_fraction * avg(first, "entropy")
            and avg(recent, "mean_length") <= self.length_fraction * avg(first, "mean_length")
        ):
            return (
                f"collapse: majority ratio {avg(recent, 'majority_ratio'):.2f}, entropy "
                f"{avg(first, 'entropy'):.3f}→{avg(recent, 'entropy'):.3f}, length "
                f"{avg(first, 'mean_length'):.1f}→{avg(recent, 'mean_length'):.1f} over the last {self.window} steps"
            )
        return None


def primed_alarm(paths: Sequence[Path]) -> CollapseAlarm:
    """An alarm that has seen the steps already written (a resumed run's, a stream's earlier updates'), so its
    windows span them: an online update of a few steps could never fill them on its own."""
    alarm = CollapseAlarm()
    for path in paths:
        for step in read_steps(path):
            alarm.update(step.model_dump())
    return alarm
