"""An --adaptive run beside the fixed run of the same problems, settings and cap, for `report`: its accuracy minus
the fixed run's, paired by problem, and the share of the fixed run's tokens and samples it spent.

The two are paired by construction: an adaptive vote's samples are the fixed vote's first samples, seed for seed
(`core/adaptive.py`), so a difference is the early stop's and nothing else's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from testtime.evaluation.metrics import Interval, paired_difference_ci

if TYPE_CHECKING:
    from testtime.experiments.report import Finished


class AdaptiveComparison(BaseModel):
    """The adaptive run against its fixed twin, or (`none`) why there is none among the inputs."""

    model_config = ConfigDict(extra="forbid")

    fixed_run: str | None = None
    problems: int = 0  # labelled problems both answered
    difference: Interval | None = None  # adaptive − fixed accuracy, paired by problem
    tokens_ratio: float | None = None  # the adaptive run's tokens / the fixed run's
    samples_ratio: float | None = None  # the adaptive votes' samples / the fixed votes'
    none: str | None = None


def compare_adaptive(
    run: Finished, runs: Sequence[Finished], differences: Callable[[Finished, Finished], list[str]]
) -> AdaptiveComparison | None:
    """None for a run that is not adaptive; else the comparison with the first fixed run that matches it
    (`differences`: the report's rule for settings that decide accuracy, plus the same cap)."""
    if run.summary.adaptive is None:
        return None
    reasons = []
    cap = run.summary.adaptive.cap_samples // max(run.summary.adaptive.drawn.n, 1)
    for fixed in runs:
        if fixed is run or fixed.summary.adaptive is not None or fixed.loaded.manifest.run.method != "majority":
            continue
        differs = differences(run, fixed)
        for name in ("seed", "seeds"):  # the pairing is seed for seed: another seed draws other samples
            mine_, theirs_ = getattr(run.loaded.manifest.run, name), getattr(fixed.loaded.manifest.run, name)
            if mine_ != theirs_:
                differs.append(f"{name} {theirs_!r} vs {mine_!r}")
        if fixed.summary.n != cap:
            differs.append(f"n {fixed.summary.n} vs the cap {cap}")
        if differs:
            reasons.append(f"{fixed.loaded.path.name}: {'; '.join(differs)}")
            continue
        mine, theirs = run.loaded.records, fixed.loaded.records
        ids = sorted(p for p, r in mine.items() if r.labelled and p in theirs)
        samples = sum(len(mine[p].candidates) for p in mine), sum(len(theirs[p].candidates) for p in theirs)
        return AdaptiveComparison(
            fixed_run=str(fixed.loaded.path),
            problems=len(ids),
            difference=paired_difference_ci(
                [float(bool(mine[p].correct)) for p in ids], [float(bool(theirs[p].correct)) for p in ids]
            ),
            tokens_ratio=run.summary.ledger.tokens / fixed.summary.ledger.tokens
            if fixed.summary.ledger.tokens
            else None,
            samples_ratio=samples[0] / samples[1] if samples[1] else None,
        )
    why = "settings differ: " + " | ".join(reasons) if reasons else "no fixed majority run among the inputs"
    return AdaptiveComparison(none=why)
