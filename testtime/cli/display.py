"""What the terminal shows: a rich progress display that observes a run (problems, calls and rounds done
against those planned; calls, tokens, cost and ETA from the ledger), the summary table, and the warnings a
reader must not miss. Metric names are the summary's own (`accuracy`, `pass@1`, `maj@k`)."""

from __future__ import annotations

import logging
import os
import sys
import time
from statistics import mean

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from testtime.core.results import ResultRecord
from testtime.evaluation.caveats import ALL_CUT, token_flag
from testtime.evaluation.metrics import Interval
from testtime.evaluation.summary import Distribution, LabelFreeSummary, PrequentialSummary, RunSummary, TTRLSummary
from testtime.run.observer import ProgressPlan

TRUNCATION_WARNING = 0.1  # a share of samples cut at --max-tokens that a reader must be told about
ERROR_WARNING = 0.05  # a share of failed samples that a reader must be told about
# Not on a terminal (a log file, CI, nohup), bars do not draw: a plain line instead, this often at most apart,
# and at each tenth of the problems.
PROGRESS_LINE_S = 10.0
EXIT_ALL_FAILED = 3  # `testtime run`'s exit status when no call succeeded: nothing was measured
EXIT_STOPPED = 4  # `testtime run`'s exit status when a budget stopped it before the end (resume to finish)
console = Console(stderr=True, emoji=False)  # progress and status; "openai:x:" is a model name, not an emoji
# Results: tables a user may pipe or redirect. Piped, rich would cut them to 80 columns ("meth…"): a file
# gets room for every cell (tables stay as narrow as their contents).
results_console = Console(width=None if sys.stdout.isatty() else 200, emoji=False)


def listing_console() -> Console:
    """For `testtime list`'s long prose cells: the terminal's width, or COLUMNS where it is set (piped to a
    pager or a file of 80 columns, cells wrap), else the results' 200."""
    columns = os.environ.get("COLUMNS", "")
    return Console(width=int(columns) if columns.isdigit() else results_console.width, emoji=False)


class _ConsoleLines(logging.Handler):
    """The models' notices (a local model loading its weights) as dim lines above the progress bars."""

    def emit(self, record: logging.LogRecord) -> None:
        console.print(f"[dim]{escape(record.getMessage())}[/dim]", soft_wrap=True)


def show_model_notices() -> None:
    logger = logging.getLogger("testtime.models")
    if not any(isinstance(h, _ConsoleLines) for h in logger.handlers):
        logger.addHandler(_ConsoleLines())
        logger.setLevel(logging.INFO)


class RunProgress:
    """A `RunObserver` drawn with rich: the problem bar, and for multi-call methods the calls and rounds bars
    (a TRT problem finishes only after all its rounds, so the problem bar alone would sit still). Where stderr
    is no terminal, a plain line every `PROGRESS_LINE_S` seconds and at each tenth of the problems."""

    def __init__(self, enabled: bool = True) -> None:
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[stats]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            disable=not enabled or not console.is_terminal,  # no terminal: lines (`_line`), not bars
            transient=False,
        )
        self.plan: ProgressPlan | None = None
        self.task: TaskID | None = None
        self.calls: TaskID | None = None
        self.rounds: TaskID | None = None
        self.calls_at_start = 0
        self.lines = enabled and not console.is_terminal
        self.started = self.last_line = time.monotonic()
        self.done = 0
        if enabled:
            show_model_notices()

    def start(self, plan: ProgressPlan) -> None:
        self.plan = plan
        self.calls_at_start = plan.totals.calls + plan.totals.cache_hits
        self.task = self.progress.add_task("problems", total=plan.problems, completed=plan.done, stats="")
        self.done = plan.done
        if plan.planned_calls:
            self.calls = self.progress.add_task("calls", total=plan.planned_calls, stats="")
        if plan.rounds:
            self.rounds = self.progress.add_task("rounds", total=plan.rounds, stats="")
        self.progress.start()

    def _stats(self) -> str:
        assert self.plan is not None
        t = self.plan.totals
        cost = f"${t.cost_usd:.4f}" if t.cost_known else f"${t.cost_usd:.4f}+?"
        # TTRL trains before it answers: its optimiser steps are the progress while the problem count sits at 0
        trained = f" · trained steps {t.train_steps}" if t.train_steps else ""
        return f"calls {t.calls} (cached {t.cache_hits}, errors {t.errors}) · tokens {t.tokens:,} · {cost}{trained}"

    def tick(self, rounds_done: int, advance: int = 0) -> None:
        if self.plan is None or self.task is None:
            return
        totals = self.plan.totals
        self.progress.update(self.task, advance=advance, stats=self._stats())
        if self.calls is not None:
            self.progress.update(self.calls, completed=totals.calls + totals.cache_hits - self.calls_at_start)
        if self.rounds is not None:
            self.progress.update(self.rounds, completed=rounds_done)
        self.done += advance
        if self.lines:
            self._line(advance)

    def _line(self, advance: int) -> None:
        assert self.plan is not None
        now, known = time.monotonic(), self.plan.problems
        if known is None:  # a stream: no tenths of an unknown total; a line at its first answer, then by the clock
            due = bool(advance) and self.done - advance == self.plan.done
            count = f"{self.done} answered (a stream)"
        else:
            total = max(known, 1)
            due = bool(advance) and self.done * 10 // total != (self.done - advance) * 10 // total
            count = f"{self.done}/{known} problems"
        if not due and now - self.last_line < PROGRESS_LINE_S:
            return
        self.last_line = now
        elapsed = int(now - self.started)
        console.print(
            f"progress: {count} · {self._stats()} · {elapsed // 60}:{elapsed % 60:02d} elapsed",
            soft_wrap=True,
            markup=False,
            highlight=False,
        )

    def problem_done(self, record: ResultRecord, rounds_done: int) -> None:
        self.tick(rounds_done, advance=1)

    def stop(self) -> None:
        self.progress.stop()

    def note(self, text: str) -> None:
        self.progress.console.print(f"[yellow]{escape(text)}[/yellow]", soft_wrap=True)  # shown under --quiet too


def _ci(metric: Interval | None) -> str:
    if metric is None:
        return "not measured"
    return f"{metric.mean:.3f}  [{metric.ci_low:.3f}, {metric.ci_high:.3f}]"


def summary_table(summary: RunSummary, title: str, sampled_as: str = "") -> Table:
    """`sampled_as`: the solver's sampling flags (`--temperature 0.6 --max-tokens 32`), so a baseline hint is a
    command `testtime report` compares with (it matches only runs sampled alike)."""
    table = Table(title=title, show_header=False)
    table.add_column("metric", style="bold")
    table.add_column("value")
    table.add_row("problems", str(summary.problems))
    if summary.uses_labels:
        table.add_row("uses labels", "[red]yes: trained on the true labels (oracle reward), an upper bound[/red]")
    if summary.on_tuned_set:
        table.add_row("held out", f"[yellow]no: {escape(summary.on_tuned_set)}[/yellow]")
    if summary.unlabelled:
        table.add_row(
            "labelled / unlabelled", f"{summary.labelled} / {summary.unlabelled} (accuracy over the labelled)"
        )
    accuracy = "not measured: no labels" if not summary.labelled else _ci(summary.accuracy)
    table.add_row("accuracy (95% CI)", accuracy)
    if summary.pass_at_1 is not None:
        table.add_row("pass@1 (mean over the final samples)", _ci(summary.pass_at_1))
    for k, value in (summary.maj_at_k or {}).items():
        table.add_row(f"maj@{k}", f"{value:.3f}")
    for label, rate in (
        ("no answer rate", summary.no_answer_rate),
        ("truncation rate", summary.truncation_rate),
        ("error rate", summary.error_rate),
    ):
        if rate is not None:
            table.add_row(label, f"{rate:.3f}")
    if summary.rounds:
        table.add_row("accuracy by round", " ".join(f"{v:.2f}" for v in summary.rounds.accuracy))
        table.add_row("oracle coverage by round", " ".join(f"{v:.2f}" for v in summary.rounds.coverage))
        if summary.same_budget_majority_n and " --temperature 0 " in f"{sampled_as} ":
            table.add_row(  # a greedy baseline's samples are copies: the very thing the greedy warning flags
                "majority at the same solver rollouts",
                "none at temperature 0 (its samples would be copies of one answer); rerun both at --temperature > 0",
            )
        elif summary.same_budget_majority_n:
            table.add_row(  # the field's name predates the two baselines: it matches rollouts, not tokens
                "majority at the same solver rollouts",
                f"--method majority --n {summary.same_budget_majority_n}{sampled_as} (tokens: `testtime report`)",
            )
    if summary.trt_knowledge is not None:
        k = summary.trt_knowledge
        lessons = "no list" if k.lessons_entered is None else f"{k.lessons_entered} lessons entered"
        table.add_row(
            "trt knowledge",
            f"strategy lists parsed {k.strategy_lists_parsed}/{k.strategy_lists}, reflections parsed "
            f"{k.reflections_parsed}/{k.reflections}, {lessons}",
        )
    if summary.ttrl is not None:
        _ttrl_rows(table, summary.ttrl, sampled_as)
    if summary.prequential is not None:
        _stream_rows(table, summary.prequential)
    if summary.label_free is not None:
        _label_free_rows(table, summary.label_free)
    if summary.adaptive is not None:
        a = summary.adaptive
        rule = a.rule if a.threshold is None else f"{a.rule} {a.threshold:g}"
        if a.rules:  # served requests that each asked for their own rule
            rule = ", ".join(f"{name}: {votes}" for name, votes in sorted(a.rules.items(), key=lambda kv: -kv[1]))
        table.add_row(
            f"adaptive ({rule})",
            f"{a.samples:,} of {a.cap_samples:,} samples ({a.share:.2f}); {a.settled} of {a.drawn.n} votes settled "
            f"before the cap",
        )
    for label, counts in (
        ("predictions by status", summary.prediction_status),
        ("samples by status", summary.sample_status),
    ):
        if counts:
            table.add_row(label, ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if summary.grader:
        table.add_row("grader", summary.grader)
    if summary.errata_problems:
        table.add_row("on the upstream errata list", ", ".join(summary.errata_problems))
    ledger = summary.ledger
    table.add_row("model calls (paid / cached)", f"{ledger.calls} / {ledger.cache_hits}")
    table.add_row("tokens (prompt + completion)", f"{ledger.prompt_tokens:,} + {ledger.completion_tokens:,}")
    cost = (
        f"${ledger.cost_usd:.4f}"
        if ledger.cost_usd is not None
        else f"unknown (≥ ${ledger.known_cost_usd:.4f}: some prices unknown)"
    )
    table.add_row("cost", cost)
    if ledger.sandbox_seconds:
        table.add_row("sandbox seconds (selection)", f"{ledger.sandbox_seconds:.1f}")
    if ledger.train_steps:
        flops = f"{ledger.train_flops:.2e}" if ledger.train_flops is not None else "unknown"
        table.add_row("training (steps, tokens, FLOPs est.)", f"{ledger.train_steps}, {ledger.train_tokens:,}, {flops}")
    if summary.calls_per_problem is not None:
        table.add_row("model calls per problem", f"{summary.calls_per_problem:.1f}")
    if summary.retried_problems:
        table.add_row("problems asked again (failed samples)", str(summary.retried_problems))
    if summary.wall_s is not None:
        table.add_row("wall time", f"{summary.wall_s:.1f} s")
    return table


def _stream_rows(table: Table, stream: PrequentialSummary) -> None:
    """A stream: each arrival answered before anything was learned from it."""
    learner = {"none": "no adaptation", "memory": "memory version", "weights": "optimiser steps"}[stream.learner]
    table.add_row("stream", f"{stream.arrivals} arrivals ({stream.order} order); {stream.updates} updates")
    if stream.learner != "none":
        table.add_row(f"stream: final state ({learner})", str(stream.final_state))
    if stream.accuracy is not None:
        table.add_row("prequential accuracy (95% CI)", _ci(stream.accuracy))
    windows = [
        f"{w.first}-{w.last}: {'-' if w.accuracy is None else f'{w.accuracy.mean:.2f}'}"
        f" (vote {'-' if w.vote_share is None else f'{w.vote_share:.2f}'})"
        for w in stream.windows
    ]
    table.add_row(f"by window of {stream.window} arrivals", "\n".join(windows))


def _spread(d: Distribution | None) -> str | None:
    return None if d is None else f"mean {d.mean:.3f} (quartiles {d.q1:.2f} / {d.median:.2f} / {d.q3:.2f})"


def _label_free_rows(table: Table, free: LabelFreeSummary) -> None:
    """What the run says without labels, on every problem."""
    rows = [
        ("label-free: answer rate", None if free.answer_rate is None else f"{free.answer_rate:.3f}"),
        ("label-free: confidence", _spread(free.confidence)),
        ("label-free: vote share", _spread(free.vote_share)),
        ("label-free: margin", _spread(free.margin)),
        ("label-free: net support (TRT)", _spread(free.support)),
        ("label-free: answers refuted (TRT)", None if free.refuted_share is None else f"{free.refuted_share:.3f}"),
        ("label-free: execution agreement", _spread(free.execution_agreement)),
    ]
    for label, value in rows:
        if value is not None:
            table.add_row(label, value)
    trajectory = free.ttrl_majority_ratio
    if trajectory:
        table.add_row(
            "label-free: ttrl majority ratio", f"{trajectory[0]:.2f} → {trajectory[-1]:.2f} ({len(trajectory)} steps)"
        )


def _ttrl_rows(table: Table, ttrl: TTRLSummary, sampled_as: str) -> None:
    """Before beside after (TTRL): the accuracy rows above are the trained model's."""
    table.add_row("ttrl: pass@1 before training", _ci(ttrl.pass_at_1_before))
    table.add_row("ttrl: pass@1 after training", _ci(ttrl.pass_at_1_after))
    table.add_row("ttrl: gain (paired, 95% CI)", _ci(ttrl.pass_at_1_gain))
    if ttrl.greedy_before is not None and ttrl.greedy_after is not None:
        table.add_row("ttrl: greedy before → after", f"{ttrl.greedy_before:.3f} → {ttrl.greedy_after:.3f}")
    if ttrl.pass_at_1_after_vs_greedy_before is not None:
        table.add_row("ttrl: pass@1 after − base greedy (paired)", _ci(ttrl.pass_at_1_after_vs_greedy_before))
    if ttrl.greedy_gain is not None:
        table.add_row("ttrl: greedy gain (paired)", _ci(ttrl.greedy_gain))
    for k, value in ttrl.maj_at_k_before.items():
        table.add_row(f"ttrl: base maj@{k} (same samples)", f"{value:.3f}")
    compute = ttrl.compute
    if compute is not None:
        flops = f", {compute.train_flops:.2g} training FLOPs" if compute.train_flops else ""
        table.add_row("ttrl: tokens per problem (training + answer)", f"{compute.tokens_per_problem:,.0f}{flops}")
        same = compute.base_majority_at_same_tokens
        if same is not None:
            capped = f" (the budget buys maj@{compute.same_tokens_k}; the base samples allow {same.k})"
            table.add_row(
                f"ttrl: base maj@{same.k} at the same tokens", f"{same.accuracy:.3f}{capped if same.capped else ''}"
            )
            table.add_row("same-tokens baseline", f"--method majority --n {compute.same_tokens_k}{sampled_as}")
    per_step = ttrl.per_step
    if per_step.step:
        table.add_row("ttrl audit: label accuracy (mean)", f"{mean(per_step.label_correct):.3f}")
        if per_step.reward_accuracy:  # 0/1 rewards only
            table.add_row("ttrl audit: reward accuracy (mean)", f"{mean(per_step.reward_accuracy):.3f}")
        if per_step.train_pass_at_k:
            table.add_row("ttrl audit: training samples' pass@k (mean)", f"{mean(per_step.train_pass_at_k):.3f}")
    health = ttrl.health
    if health is not None:
        table.add_row("ttrl audit: correct answer extinct (last visit)", f"{health.extinct_at_last_visit:.3f}")
        windows = health.wrong_to_extinct_steps
        went = f"{health.labels_went_wrong} prompts"
        if windows:
            went += f"; correct answer extinct a median {windows[len(windows) // 2]} steps later"
        table.add_row("ttrl audit: labels that went wrong", went)


def warnings_for(summary: RunSummary) -> list[str]:
    """Lines a reader must not miss under the table."""
    lines = []
    if summary.all_failed():
        lines.append(f"ERROR: every model call failed ({summary.ledger.calls} calls): {summary.first_error}")
    elif (summary.error_rate or 0.0) > ERROR_WARNING:
        lines.append(
            f"WARNING: {summary.error_rate:.0%} of samples are errors, graded wrong "
            f"(e.g. {summary.first_error}); `{command()} run --resume DIR` asks again for every one of them"
        )
    truncated = summary.truncation_rate or 0.0
    if truncated > TRUNCATION_WARNING and not any(w.startswith(ALL_CUT) for w in summary.warnings):
        flag = token_flag(summary.method)
        lines.append(
            f"WARNING: {truncated:.0%} of model calls stopped at their token cap before they finished: reasoning "
            f"was cut and answers lost. Raise {flag} (reasoning models need thousands)."
        )
    if summary.graded_on_public_tests_only:
        lines.append(
            f"WARNING: {summary.graded_on_public_tests_only} problems were graded on their PUBLIC tests "
            "only (no private tests in the data). Selectors may have used those same tests: these scores "
            "are optimistic and not comparable with official LiveCodeBench numbers."
        )
    lines += [f"WARNING: {warning}" for warning in summary.warnings]
    return lines


def print_warnings(summary: RunSummary) -> None:
    for line in warnings_for(summary):
        console.print(f"[bold yellow]{escape(line)}[/bold yellow]", soft_wrap=True)


def command() -> str:
    """How to type `testtime` in the hints a command prints: `testtime` where the shell finds this install's
    command, else its path (`.venv/bin/testtime` after `scripts/install`, which puts nothing on PATH)."""
    import os
    import shutil
    import sys
    from pathlib import Path

    installed = Path(sys.executable).parent / "testtime"
    found = shutil.which("testtime")
    if found and (not installed.exists() or Path(found).resolve() == installed.resolve()):
        return "testtime"
    if not installed.exists():
        return f"{sys.executable} -m testtime.cli"
    absolute = Path(os.path.abspath(installed))  # not resolve(): the venv's python may link elsewhere
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)
