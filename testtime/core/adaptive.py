"""Adaptive compute: a problem's vote drawn in waves, stopped once it is settled.

A vote's samples are drawn `min_samples` first, then `wave` at a time, up to the cap (`--n`). After each wave the
rule looks at the answers so far and decides whether more samples could still matter. Three rules are this
project's (they count classes of equivalent answers, the vote's own, and leave samples with no answer out):

- `exact`: the leading class cannot be caught by the samples left (leader > runner-up + samples left), so the
  answer is the one the full vote would give: never changes an answer, saves least.
- `posterior` (the default; Adaptive-Consistency's Beta criterion, Aggarwal et al. 2023): the probability that
  the leading answer's share of the two leading classes exceeds one half, under a uniform prior (a Beta posterior
  on the two counts), reaches `threshold` (default 0.8, chosen on a set apart from the reported one:
  docs/methods/majority.md), checked after 4 samples and then every 2.
- `window` (after Early-Stopping Self-Consistency): the last `threshold` samples (default 4) all gave one answer,
  checked after every wave, so windows overlap.

Two are the papers' own procedures, exactly, for a comparison the papers would recognise:

- `ac` (Adaptive-Consistency as its authors run it): the Beta criterion at 0.95, checked after every sample, over
  answers grouped by their text, a sample with no answer counting as a class of its own (`None`).
- `esc` (Early-Stopping Self-Consistency, Li et al. 2024): disjoint windows of `threshold` samples (default 5);
  stop after the first window whose answers are all one text (no answer is a text too).

A wave draws the next sample indices of the same call, so an adaptive run's first k samples are a fixed run's
first k (same seeds, same cache keys): the two are paired by construction, and a killed run resumes from its cache.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from pydantic import Field, model_validator

from testtime.core.records import Record

AdaptiveRuleName = Literal["exact", "posterior", "window", "ac", "esc"]
RULES: tuple[AdaptiveRuleName, ...] = ("exact", "posterior", "window", "ac", "esc")
PAPERS = frozenset({"ac", "esc"})  # the papers' own procedures: their checks, their grouping, their defaults
# posterior: chosen on arith seed 1 (docs/methods/majority.md); window: a handful of samples; ac: the paper's 0.95;
# esc: the paper's window of 5
DEFAULT_THRESHOLDS: dict[str, float | None] = {"exact": None, "posterior": 0.8, "window": 4, "ac": 0.95, "esc": 5}
CONFIDENCE_RULES = frozenset({"posterior", "ac"})
WINDOW_RULES = frozenset({"window", "esc"})
DEFAULT_RULE: AdaptiveRuleName = "posterior"
# Each field's flag on the run's command line (`--adaptive-min` is the shorter name of min_samples)
FLAGS = {
    "rule": "adaptive_rule",
    "threshold": "adaptive_threshold",
    "min_samples": "adaptive_min",
    "wave": "adaptive_wave",
}


class Adaptive(Record):
    """How a vote stops early: the rule, its threshold, the samples before any stop and the wave after. The one
    shape of it: the run's flags (`--adaptive-rule`, `--adaptive-threshold`, `--adaptive-min`, `--adaptive-wave`:
    `FLAGS`) and a served request's `testtime.adaptive` fields are generated from these fields."""

    rule: AdaptiveRuleName = Field(
        default=DEFAULT_RULE,
        description="posterior (default: Adaptive-Consistency's Beta criterion after 4 samples, then every 2) | "
        "exact (never changes the full vote's answer) | window (the last W agree) | ac (Adaptive-Consistency as "
        "published: every sample, by text, 0.95) | esc (Early-Stopping Self-Consistency: disjoint windows of 5)",
    )
    threshold: float | None = Field(
        default=None,
        description="posterior, ac: the confidence (default 0.8; ac 0.95); window, esc: W samples (default 4; esc 5)",
    )
    min_samples: int | None = Field(
        default=None, ge=1, description="samples a vote draws before any stop (default 4; not for ac, esc)"
    )
    wave: int | None = Field(
        default=None, ge=1, description="samples drawn at a time after the first (default 2; not for ac, esc)"
    )

    @model_validator(mode="after")
    def _threshold(self) -> Adaptive:
        if self.rule in PAPERS and (self.min_samples is not None or self.wave is not None):
            when = "after every sample" if self.rule == "ac" else "after each disjoint window"
            raise ValueError(
                f"the {self.rule} rule is its paper's procedure (a check {when}): min_samples and wave are its own; "
                "the posterior and window rules take them"
            )
        t = self.threshold
        if t is None:
            return self
        if self.rule == "exact":
            raise ValueError("the exact rule has no threshold (it stops only when nothing left can change the vote)")
        if self.rule in CONFIDENCE_RULES and not 0.5 < t < 1:
            raise ValueError(f"the {self.rule} rule's threshold is a confidence between 0.5 and 1, not {t:g}")
        if self.rule in WINDOW_RULES and (t < 2 or t != int(t)):
            raise ValueError(f"the {self.rule} rule's threshold is a number of samples (2 or more), not {t:g}")
        return self

    def misfit(self, cap: int) -> tuple[str, str] | None:
        """Which field cannot mean anything for votes of `cap` samples, and why (None: the rule can stop one): a
        first wave past the cap never stops early, nor does a window wider than the cap."""
        if self.min_samples is not None and self.min_samples > cap:
            return (
                "min_samples",
                f"{self.min_samples:,} samples before any stop is past the cap of {cap}: nothing is saved",
            )
        if self.rule in WINDOW_RULES and int(self.limit or 0) > cap:
            return (
                "threshold",
                f"a window of {int(self.limit or 0)} samples is wider than the cap of {cap}: it never settles",
            )
        return None

    @property
    def limit(self) -> float | None:
        return DEFAULT_THRESHOLDS[self.rule] if self.threshold is None else self.threshold

    def first(self, cap: int) -> int:
        """The first wave: `min_samples` (ac: 1; esc: its window), and at least a window's worth for the window
        rule."""
        if self.rule == "ac":
            return min(cap, 1)
        window = int(self.limit or 0) if self.rule in WINDOW_RULES else 0
        return min(cap, max(4 if self.min_samples is None else self.min_samples, window))

    def step(self) -> int:
        """The samples each wave after the first draws: `wave` (default 2; ac: 1; esc: its window)."""
        if self.rule == "ac":
            return 1
        if self.rule == "esc":
            return int(self.limit or 1)
        return 2 if self.wave is None else self.wave

    def schedule(self, cap: int) -> list[int]:
        """The samples drawn once each wave has landed: the first wave, then `step()` more at a time, to the cap."""
        drawn = [self.first(cap)]
        while drawn[-1] < cap:
            drawn.append(min(cap, drawn[-1] + self.step()))
        return drawn

    def counted(self, answers: Sequence[str | None], equivalent: Sequence[Sequence[int]]) -> list[list[int]]:
        """The classes the rule counts: the vote's classes of equivalent answers (`equivalent`, no-answers left
        out), or for the papers' procedures the answers grouped by their text, no answer a class of its own."""
        if self.rule not in PAPERS:
            return [list(c) for c in equivalent]
        by_text: dict[str | None, list[int]] = {}
        for index, answer in enumerate(answers):
            by_text.setdefault(answer, []).append(index)
        return list(by_text.values())

    def verdict(self, classes: Sequence[Sequence[int]], drawn: int, cap: int) -> AdaptiveStop | None:
        """Whether the vote stops after `drawn` samples, and why (None: draw the next wave)."""
        confidence = self.settled(classes, drawn, cap) if drawn < cap else None
        if confidence is None and drawn < cap:
            return None
        return AdaptiveStop(
            rule=self.rule,
            threshold=self.limit,
            drawn=drawn,
            cap=cap,
            reason="cap" if confidence is None else "settled",
            confidence=confidence,
        )

    def settled(self, classes: Sequence[Sequence[int]], drawn: int, cap: int) -> float | None:
        """The rule's confidence that the vote over `drawn` samples is settled (None: draw on). `classes`: the
        classes it counts (`counted`), each the indices of its samples."""
        sizes = sorted((len(c) for c in classes), reverse=True)
        leader, runner_up = [*sizes, 0, 0][:2]
        if leader == 0:
            return None  # no answer yet: nothing is settled
        if self.rule == "exact":
            return 1.0 if leader > runner_up + (cap - drawn) else None
        if self.rule in CONFIDENCE_RULES:
            confidence = leader_share_beyond_half(leader, runner_up)
            return confidence if confidence >= (self.limit or 1.0) else None
        window = int(self.limit or drawn)
        if drawn < window:
            return None
        last = set(range(drawn - window, drawn))
        return 1.0 if any(last <= set(c) for c in classes) else None


def leader_share_beyond_half(leader: int, runner_up: int) -> float:
    """P(p > 1/2) for p ~ Beta(leader + 1, runner_up + 1): the probability that the leading answer is the likelier
    of the two, given their counts and a uniform prior. With integer parameters it is exact:
    P(Beta(a, b) > 1/2) = P(Binomial(a + b - 1, 1/2) <= a - 1)."""
    a, b = leader + 1, runner_up + 1
    trials = a + b - 1
    return sum(math.comb(trials, j) for j in range(a)) / 2**trials


class AdaptiveStop(Record):
    """Why a problem's vote stopped where it did: its rule, the samples drawn of the cap, and the reason."""

    rule: AdaptiveRuleName
    threshold: float | None
    drawn: int
    cap: int
    reason: Literal["settled", "cap"]  # settled: the rule stopped it; cap: it drew all --n samples
    confidence: float | None = None  # the rule's confidence when it stopped (None at the cap)
