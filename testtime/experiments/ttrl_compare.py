"""TTRL's rewards side by side: the same run trained with each reward (`majority`, its label-free variants, the
`random` and `format` controls, the `oracle` upper bound) at identical settings (same problems, seed, trainer,
steps and tokens). Each reward is a sub-run in `<out>/<reward>/`, resumable. Per reward: its pass@1 gain (paired
by problem, 95% bootstrap CI), TTRL (majority) minus it, it minus each control (what it earns beyond a
signal-free reward), the fraction of the oracle's gain it recovers (TTRL's "RL (leakage)" curve, its Figure 7;
a paired bootstrap interval too, the problems resampled together for both gains), and its health without
labels (collapse alarms, the last step's token entropy) and with them (answers extinct at the last visit).

    testtime ttrl compare --out runs/ttrl-compare      # the miniature's settings (arith, embedded model)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from statistics import mean
from typing import Any

from testtime.core.errors import UserError
from testtime.core.results import read_steps
from testtime.evaluation.metrics import Interval, RatioInterval, paired_difference_ci, paired_ratio_ci
from testtime.evaluation.summary import RunSummary
from testtime.methods.ttrl.rewards import REWARDS
from testtime.run.directory import RunDir
from testtime.run.execute import execute
from testtime.run.lifecycle import create_or_resume
from testtime.run.observer import QuietObserver, RunObserver
from testtime.run.settings import RunSettings

CONTROLS = ("random", "format")
DEFAULT_REWARDS = ("majority", "novelty", "random", "format", "oracle")


def run_rewards(
    base: RunSettings,
    out: Path,
    rewards: Sequence[str] = DEFAULT_REWARDS,
    observe: Callable[[], RunObserver] = QuietObserver,
    log: Callable[[str], None] = print,
) -> dict[str, RunSummary]:
    """Train one TTRL run per reward at `base`'s settings; returns each sub-run's summary."""
    if base.method != "ttrl":
        raise UserError("compare trains TTRL with each reward: the base run must be --method ttrl")
    for reward in rewards:
        REWARDS.get(reward)  # an unknown reward fails before any training
    if "majority" not in rewards:
        raise UserError("rewards are read against TTRL: include the majority reward")
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


def _minus(after: dict[str, float], other: dict[str, float], seed: int) -> Interval | None:
    """This reward's after-training pass@1 minus another's, paired by problem (both start from one model)."""
    shared = sorted(set(after) & set(other))
    return paired_difference_ci([after[i] for i in shared], [other[i] for i in shared], seed) if shared else None


def _share(
    before: dict[str, float],
    after: dict[str, float],
    oracle_before: dict[str, float],
    oracle_after: dict[str, float],
    seed: int,
) -> RatioInterval | None:
    """This reward's gain over the oracle's, on the problems both graded, with a paired bootstrap interval (and the
    share of resamples in which the oracle gained nothing, which have no ratio)."""
    ids = sorted(set(before) & set(after) & set(oracle_before) & set(oracle_after))
    gains = [after[i] - before[i] for i in ids]
    return paired_ratio_ci(gains, [oracle_after[i] - oracle_before[i] for i in ids], seed)


def _health(folder: Path) -> dict[str, Any]:
    steps = read_steps(folder / "ttrl" / "steps.jsonl")
    summary = RunDir.open_existing(folder).read_summary()
    health = summary.ttrl.health if summary and summary.ttrl else None
    entropies = [s.entropy for s in steps if s.entropy is not None]
    return {
        "collapse_alarms": sum(s.collapse_alarm is not None for s in steps),
        "final_entropy": entropies[-1] if entropies else None,
        "extinct_at_last_visit": health.extinct_at_last_visit if health else None,  # audit (labels)
    }


def compare(out: Path, rewards: Sequence[str] = DEFAULT_REWARDS, seed: int = 0) -> list[dict[str, Any]]:
    """One row per reward: its gain; TTRL minus it; it minus each control; its share of the oracle's gain."""
    per_reward = {reward: _per_problem(out / reward) for reward in rewards}
    gains: dict[str, Interval | None] = {}
    for reward, (before, after) in per_reward.items():
        ids = sorted(set(before) & set(after))
        gains[reward] = paired_difference_ci([after[i] for i in ids], [before[i] for i in ids], seed) if ids else None
    oracle_before, oracle_after = per_reward.get("oracle", ({}, {}))
    rows = []
    for reward in rewards:
        before, after = per_reward[reward]
        ids = sorted(set(before) & set(after))
        gain = gains[reward]
        row: dict[str, Any] = {
            "reward": reward,
            "uses_labels": reward == "oracle",
            "problems": len(ids),
            "before": mean(before[i] for i in ids) if ids else None,
            "after": mean(after[i] for i in ids) if ids else None,
            "gain": gain,
            # of what the true labels bought, the share this reward recovers, with its paired interval (resampled
            # problems are the same for both gains); none of a gain that is not one
            "of_oracle": _share(before, after, oracle_before, oracle_after, seed),
            "health": _health(out / reward),
        }
        if reward != "majority":
            row["ttrl_minus"] = _minus(per_reward["majority"][1], after, seed)
        for control in CONTROLS:
            if control in per_reward and reward != control:
                row[f"minus_{control}"] = _minus(after, per_reward[control][1], seed)
        rows.append(row)
    return rows


def report_lines(rows: Sequence[dict[str, Any]]) -> list[str]:
    def ci(m: Interval | None) -> str:
        return "—" if m is None else f"{m.mean:+.3f} [{m.ci_low:+.3f}, {m.ci_high:+.3f}]"

    def share(m: RatioInterval | None) -> str:
        if m is None:
            return "—"
        i, gap = m.interval, f" ({m.undefined:.0%} no oracle gain)" if m.undefined else ""
        return f"{i.mean:.2f} [{i.ci_low:.2f}, {i.ci_high:.2f}]{gap}"

    def value(x: float | None, width: int = 7) -> str:
        return f"{x:{width}.3f}" if x is not None else f"{'—':>{width}}"

    head = f"{'reward':15} {'problems':>8} {'before':>7} {'after':>7}  {'gain (paired CI)':26} "
    head += f"{'TTRL − this':26} {'this − random':26} {'this − format':26} {'of oracle (paired CI)':26}  "
    head += "health (alarms, entropy, extinct)"
    lines = [head]
    for row in rows:
        name = row["reward"] + (" (labels)" if row["uses_labels"] else "")
        numbers = f"{row['problems']:8d} {value(row['before'])} {value(row['after'])}"
        health = row["health"]
        shown = f"{health['collapse_alarms']}, {value(health['final_entropy'], 5).strip()}, "
        shown += value(health["extinct_at_last_visit"], 5).strip()
        lines.append(
            f"{name:15} {numbers}  {ci(row['gain']):26} {ci(row.get('ttrl_minus')):26} "
            f"{ci(row.get('minus_random')):26} {ci(row.get('minus_format')):26} {share(row['of_oracle']):26}  {shown}"
        )
    return lines
