"""Adaptive compute: a problem's vote drawn in waves, stopped once it is settled.

A vote's samples are drawn `min_samples` first, then `wave` at a time, up to the cap (`--n`). After each wave the
rule looks at the classes of equivalent answers so far and decides whether more samples could still matter:

- `exact`: the leading class cannot be caught by the samples left (leader > runner-up + samples left), so the
  answer is the one the full vote would give: never changes an answer, saves least.
- `posterior` (Adaptive-Consistency, Aggarwal et al. 2023, its Beta criterion): the probability that the
  leading answer's share of the two leading classes exceeds one half, under a uniform prior (a Beta posterior on
  the two counts), reaches `threshold` (default 0.8; the paper's 0.95 saves 2-7% on the embedded model, whose
  votes at T=1.0 scatter: docs/methods/majority.md says how 0.8 was chosen, on a set apart from the reported one).
- `window` (Early-Stopping Self-Consistency, Li et al. 2024): the last `threshold` samples (default 4) all gave
  one answer.

A wave draws the next sample indices of the same call, so an adaptive run's first k samples are a fixed run's
first k (same seeds, same cache keys): the two are paired by construction, and a killed run resumes from its cache.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from pydantic import Field, model_validator

from testtime.core.records import Record

AdaptiveRuleName = Literal["exact", "posterior", "window"]
RULES: tuple[AdaptiveRuleName, ...] = ("exact", "posterior", "window")
# posterior: chosen on arith seed 1 (docs/methods/majority.md); window: ESC's windows are a handful of samples
DEFAULT_THRESHOLDS: dict[str, float | None] = {"exact": None, "posterior": 0.8, "window": 4}
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
        description="posterior (default: Adaptive-Consistency's Beta criterion, checked after each wave) | exact "
        "(never changes the full vote's answer) | window (the last W samples agree)",
    )
    threshold: float | None = Field(
        default=None, description="posterior: the confidence (default 0.8); window: W samples (default 4)"
    )
    min_samples: int = Field(default=4, ge=1, description="samples a vote draws before any stop (default 4)")
    wave: int = Field(default=2, ge=1, description="samples drawn at a time after the first (default 2)")

    @model_validator(mode="after")
    def _threshold(self) -> Adaptive:
        t = self.threshold
        if t is None:
            return self
        if self.rule == "exact":
            raise ValueError("the exact rule has no threshold (it stops only when nothing left can change the vote)")
        if self.rule == "posterior" and not 0.5 < t < 1:
            raise ValueError(f"the posterior rule's threshold is a confidence between 0.5 and 1, not {t:g}")
        if self.rule == "window" and (t < 2 or t != int(t)):
            raise ValueError(f"the window rule's threshold is a number of samples (2 or more), not {t:g}")
        return self

    def misfit(self, cap: int) -> tuple[str, str] | None:
        """Which field cannot mean anything for votes of `cap` samples, and why (None: the rule can stop one): a
        first wave past the cap never stops early, nor does a window wider than the cap."""
        if self.min_samples > cap:
            return (
                "min_samples",
                f"{self.min_samples:,} samples before any stop is past the cap of {cap}: nothing is saved",
            )
        if self.rule == "window" and int(self.limit or 0) > cap:
            return (
                "threshold",
                f"a window of {int(self.limit or 0)} samples is wider than the cap of {cap}: it never settles",
            )
        return None

    @property
    def limit(self) -> float | None:
        return DEFAULT_THRESHOLDS[self.rule] if self.threshold is None else self.threshold

    def first(self, cap: int) -> int:
        """The first wave: `min_samples`, and at least a window's worth for the window rule."""
        window = int(self.limit or 0) if self.rule == "window" else 0
        return min(cap, max(self.min_samples, window))

    def schedule(self, cap: int) -> list[int]:
        """The samples drawn once each wave has landed: the first wave, then `wave` more at a time, up to the cap."""
        drawn = [self.first(cap)]
        while drawn[-1] < cap:
            drawn.append(min(cap, drawn[-1] + self.wave))
        return drawn

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
        indices of each class of equivalent answers (samples with no answer belong to none)."""
        sizes = sorted((len(c) for c in classes), reverse=True)
        leader, runner_up = [*sizes, 0, 0][:2]
        if leader == 0:
            return None  # no answer yet: nothing is settled
        if self.rule == "exact":
            return 1.0 if leader > runner_up + (cap - drawn) else None
        if self.rule == "posterior":
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
