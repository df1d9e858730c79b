"""Progress and result display for a run: a rich progress bar fed by the ledger, and the final table."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from statistics import mean
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from testtime.core.ledger import LedgerTotals

TRUNCATION_WARNING = 0.1  # a share of samples cut at --max-tokens that a reader must be told about
ERROR_WARNING = 0.05  # a share of failed samples that a reader must be told about
EXIT_ALL_FAILED = 3  # `testtime run`'s exit status when no call succeeded: nothing was measured
console = Console(stderr=True)  # progress and status
results_console = Console()  # results: tables a user may pipe or redirect


class RunProgress:
    """Problems done, and for multi-call methods the calls and rounds done against those planned; calls,
    tokens, cost and ETA, refreshed from the ledger while calls are in flight (a TRT problem finishes only
    after all its rounds, so the problem bar alone would sit still for a long time)."""

    def __init__(
        self,
        total: int,
        done: int,
        totals: LedgerTotals,
        enabled: bool = True,
        planned_calls: int | None = None,
        rounds: tuple[int, Callable[[], int]] | None = None,
    ) -> None:
        self.totals = totals
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[stats]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            disable=not enabled,
            transient=False,
        )
        self.task = self.progress.add_task("problems", total=total, completed=done, stats="")
        self.calls_at_start = totals.calls + totals.cache_hits
        self.calls = self.progress.add_task("calls", total=planned_calls, stats="") if planned_calls else None
        self.rounds = rounds
        self.rounds_task = self.progress.add_task("rounds", total=rounds[0], stats="") if rounds else None

    def _stats(self) -> str:
        t = self.totals
        cost = f"${t.cost_usd:.4f}" if t.cost_known else f"${t.cost_usd:.4f}+?"
        return f"calls {t.calls} (cached {t.cache_hits}, errors {t.errors}) · tokens {t.tokens:,} · {cost}"

    def refresh_once(self, advance: int = 0) -> None:
        self.progress.update(self.task, advance=advance, stats=self._stats())
        if self.calls is not None:
            self.progress.update(self.calls, completed=self.totals.calls + self.totals.cache_hits - self.calls_at_start)
        if self.rounds is not None and self.rounds_task is not None:
            self.progress.update(self.rounds_task, completed=self.rounds[1]())

    def advance(self) -> None:
        self.refresh_once(advance=1)

    async def refresh_forever(self) -> None:
        while True:
            self.refresh_once()
            await asyncio.sleep(0.5)

    def __enter__(self) -> RunProgress:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.refresh_once()
        self.progress.__exit__(*exc)


def _ci(metric: dict[str, float]) -> str:
    return f"{metric['mean']:.3f}  [{metric['ci_low']:.3f}, {metric['ci_high']:.3f}]"


def summary_table(summary: dict[str, Any], title: str) -> Table:
    table = Table(title=title, show_header=False)
    table.add_column("metric", style="bold")
    table.add_column("value")
    table.add_row("problems", str(summary["problems"]))
    table.add_row("accuracy (95% CI)", _ci(summary["accuracy"]))
    if "pass@1_avg" in summary:
        label = "last round's rollouts: mean accuracy" if summary.get("rounds") else "pass@1 = avg over samples"
        table.add_row(label, _ci(summary["pass@1_avg"]))
    for k, value in summary.get("maj@k", {}).items():
        table.add_row(f"maj@{k}", f"{value:.3f}")
    for rate in ("no_answer_rate", "truncation_rate", "error_rate"):
        if rate in summary:
            table.add_row(rate.replace("_", " "), f"{summary[rate]:.3f}")
    if summary.get("rounds"):
        table.add_row("accuracy by round", " ".join(f"{v:.2f}" for v in summary["rounds"]["accuracy"]))
        table.add_row("oracle coverage by round", " ".join(f"{v:.2f}" for v in summary["rounds"]["coverage"]))
        if summary.get("same_budget_majority_n"):
            table.add_row("same-budget baseline", f"--method majority --n {summary['same_budget_majority_n']}")
    _ttrl_rows(table, summary.get("ttrl"))
    for key, label in (("prediction_status", "predictions by status"), ("sample_status", "samples by status")):
        if summary.get(key):
            table.add_row(label, ", ".join(f"{k} {v}" for k, v in sorted(summary[key].items())))
    if summary.get("grader"):
        table.add_row("grader", summary["grader"])
    if summary.get("errata_problems"):
        table.add_row("on the upstream errata list", ", ".join(summary["errata_problems"]))
    ledger = summary.get("ledger", {})
    if ledger:
        table.add_row("model calls (paid / cached)", f"{ledger['calls']} / {ledger['cache_hits']}")
        table.add_row("tokens (prompt + completion)", f"{ledger['prompt_tokens']:,} + {ledger['completion_tokens']:,}")
        table.add_row("cost", f"${ledger['cost_usd']:.4f}" + ("" if ledger["cost_known"] else " (some prices unknown)"))
        if ledger.get("sandbox_seconds"):
            table.add_row("sandbox seconds (selection)", f"{ledger['sandbox_seconds']:.1f}")
        if ledger.get("train_steps"):
            table.add_row(
                "training (steps, tokens, FLOPs est.)",
                f"{ledger['train_steps']}, {ledger['train_tokens']:,}, {ledger.get('train_flops', 0):.2e}",
            )
    if "calls_per_problem" in summary:
        table.add_row("model calls per problem", f"{summary['calls_per_problem']:.1f}")
    if summary.get("retried_problems"):
        table.add_row("problems asked again (failed samples)", str(summary["retried_problems"]))
    if "wall_s" in summary:
        table.add_row("wall time", f"{summary['wall_s']:.1f} s")
    return table


def _ttrl_rows(table: Table, ttrl: dict[str, Any] | None) -> None:
    """Before beside after (TTRL): the accuracy rows above are the trained model's."""
    if not ttrl:
        return
    table.add_row("ttrl: pass@1 before training", _ci(ttrl["pass@1_before"]))
    table.add_row("ttrl: pass@1 after training", _ci(ttrl["pass@1_after"]))
    table.add_row("ttrl: gain (paired, 95% CI)", _ci(ttrl["pass@1_gain"]))
    if "greedy_before" in ttrl and "greedy_after" in ttrl:
        table.add_row("ttrl: greedy before → after", f"{ttrl['greedy_before']:.3f} → {ttrl['greedy_after']:.3f}")
    for k, value in ttrl.get("maj@k_before", {}).items():
        table.add_row(f"ttrl: base maj@{k} (same samples)", f"{value:.3f}")
    compute = ttrl.get("compute", {})
    if compute:
        flops = f", {compute['train_flops']:.2g} training FLOPs" if compute.get("train_flops") else ""
        table.add_row("ttrl: tokens per problem (training + answer)", f"{compute['tokens_per_problem']:,.0f}{flops}")
    same = compute.get("base_majority_at_same_tokens")
    if same:
        capped = f" (the budget buys maj@{compute['same_tokens_k']}; the base samples allow {same['k']})"
        label = f"ttrl: base maj@{same['k']} at the same tokens"
        table.add_row(label, f"{same['accuracy']:.3f}{capped if same['capped'] else ''}")
        table.add_row("same-tokens baseline", f"--method majority --n {compute['same_tokens_k']}")
    per_step = ttrl.get("per_step", {})
    if per_step.get("step"):
        table.add_row("ttrl audit: label accuracy (mean)", f"{mean(per_step['label_correct']):.3f}")
        table.add_row("ttrl audit: reward accuracy (mean)", f"{mean(per_step['reward_accuracy']):.3f}")
        if per_step.get("train_pass@k"):
            table.add_row("ttrl audit: training samples' pass@k (mean)", f"{mean(per_step['train_pass@k']):.3f}")
    health = ttrl.get("health")
    if health:
        table.add_row("ttrl audit: correct answer extinct (last visit)", f"{health['extinct_at_last_visit']:.3f}")
        windows = health["wrong_to_extinct_steps"]
        went = f"{health['labels_went_wrong']} prompts"
        if windows:
            went += f"; correct answer extinct a median {windows[len(windows) // 2]} steps later"
        table.add_row("ttrl audit: labels that went wrong", went)


def warnings_for(summary: dict[str, Any]) -> list[str]:
    """Lines a reader must not miss under the table."""
    lines = []
    if all_failed(summary):
        lines.append(f"ERROR: every model call failed ({summary['ledger']['calls']} calls): {summary['first_error']}")
    elif summary.get("error_rate", 0.0) > ERROR_WARNING:
        lines.append(
            f"WARNING: {summary['error_rate']:.0%} of samples are errors, graded wrong "
            f"(e.g. {summary['first_error']}); `testtime run --resume DIR` asks again for every one of them"
        )
    truncated = summary.get("truncation_rate", 0.0)
    if truncated > TRUNCATION_WARNING:
        lines.append(
            f"WARNING: {truncated:.0%} of samples stopped at --max-tokens before they finished: reasoning was cut "
            "and answers lost. Raise --max-tokens (reasoning models need thousands)."
        )
    if summary.get("graded_on_public_tests_only"):
        lines.append(
            f"WARNING: {summary['graded_on_public_tests_only']} problems were graded on their PUBLIC tests "
            "only (no private tests in the data). Selectors may have used those same tests: these scores "
            "are optimistic and not comparable with official LiveCodeBench numbers."
        )
    return lines


def all_failed(summary: dict[str, Any]) -> bool:
    """No call that reached a backend succeeded (and some did): the run measured nothing."""
    ledger = summary.get("ledger", {})
    return ledger.get("calls", 0) > 0 and ledger.get("errors", 0) == ledger.get("calls", 0) and "first_error" in summary
