"""TTRL beside its controls: the same run with reward=majority (TTRL), random and format, at identical settings
(same problems, seed, trainer, steps and tokens), so a gain reads against what a signal-free reward gives the
same model (reference ttrl.md, "Controls"). Each reward is a sub-run in `<out>/<reward>/`, resumable; the table
gives each reward's pass@1 gain (paired by problem, 95% bootstrap CI) and TTRL minus each control, paired by
problem on the after-training pass@1 (both start from the same base model, evaluated the same way).

    testtime ttrl controls --out runs/ttrl-controls          # the miniature's settings (arith, embedded model)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from statistics import mean
from typing import Any

from testtime.core.errors import UserError
from testtime.evaluation.metrics import Interval, paired_difference_ci
from testtime.evaluation.summary import RunSummary
from testtime.methods.ttrl.controls import REWARDS
from testtime.run.directory import RunDir
from testtime.run.execute import execute
from testtime.run.lifecycle import create_or_resume
from testtime.run.observer import QuietObserver, RunObserver
from testtime.run.settings import RunSettings

DEFAULT_REWARDS = ("majority", "random", "format")


def run_controls(
    base: RunSettings,
    out: Path,
    rewards: Sequence[str] = DEFAULT_REWARDS,
    observe: Callable[[], RunObserver] = QuietObserver,
    log: Callable[[str], None] = print,
) -> dict[str, RunSummary]:
    """Train one TTRL run per reward at `base`'s settings; returns each sub-run's summary."""
    if base.method != "ttrl":
        raise UserError("controls compare TTRL rewards: the base run must be --method ttrl")
    for reward in rewards:
        REWARDS.get(reward)  # an unknown reward fails before any training
    if "majority" not in rewards:
        raise UserError("controls are read against TTRL: include the majority reward")
    summaries = {}
    for reward in rewards:
        folder = out / reward
        log(f"[{reward}] {folder}")
        settings = base.model_copy(update={"method_options": {**base.method_options, "reward": reward}})
        summaries[reward] = execute(create_or_resume(settings, folder), observe())
    return summaries


def _per_problem(folder: Path) -> tuple[dict[str, float], dict[str, float]]:
    """Pass@1 per problem before and after training, from a sub-run's graded results."""
    before, after = {}, {}
    for record in RunDir.open_existing(folder).read_results():
        audit = record.ttrl_audit
        if audit is None or not record.sample_correct:  # unlabelled problems have no audit: nothing to pair
            continue
        before[record.problem_id] = mean(audit.before_sample_correct or (0.0,))
        after[record.problem_id] = mean(record.sample_correct)
    return before, after


def compare(out: Path, rewards: Sequence[str] = DEFAULT_REWARDS, seed: int = 0) -> list[dict[str, Any]]:
    """One row per reward: its gain, and (controls) TTRL's after-training pass@1 minus the control's."""
    per_reward = {reward: _per_problem(out / reward) for reward in rewards}
    _, ttrl_after = per_reward["majority"]
    rows = []
    for reward in rewards:
        before, after = per_reward[reward]
        ids = sorted(set(before) & set(after))
        row: dict[str, Any] = {
            "reward": reward,
            "problems": len(ids),
            "before": mean(before[i] for i in ids) if ids else None,
            "after": mean(after[i] for i in ids) if ids else None,
            "gain": paired_difference_ci([after[i] for i in ids], [before[i] for i in ids], seed),
        }
        if reward != "majority":
            shared = sorted(set(ttrl_after) & set(after))
            row["ttrl_minus"] = paired_difference_ci([ttrl_after[i] for i in shared], [after[i] for i in shared], seed)
        rows.append(row)
    return rows


def report_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    def ci(m: Interval | None) -> str:
        return "—" if m is None else f"{m.mean:+.3f} [{m.ci_low:+.3f}, {m.ci_high:+.3f}]"

    def value(x: float | None) -> str:
        return f"{x:7.3f}" if x is not None else f"{'—':>7}"

    head = f"{'reward':10} {'problems':>8} {'before':>7} {'after':>7}  {'gain (paired CI)':26} "
    lines = [head + "TTRL − this (paired CI)"]
    for row in rows:
        minus = ci(row.get("ttrl_minus"))
        numbers = f"{row['problems']:8d} {value(row['before'])} {value(row['after'])}"
        lines.append(f"{row['reward']:10} {numbers}  {ci(row['gain']):26} {minus}")
    return lines
