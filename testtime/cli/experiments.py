"""`testtime ablate depth-width` and `testtime report`: compute-matched comparisons from run ledgers."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from testtime.cli.shared_flags import ADAPTIVE, SharedFlags, run_settings
from testtime.core.errors import UserError

if TYPE_CHECKING:
    from testtime.evaluation.summary import PrequentialSummary

ablate_app = typer.Typer(help="Sweeps at matched compute, measured by the ledger.", no_args_is_help=True)
Opt = typer.Option


def _ints(text: str, flag: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UserError(f"{flag} expects comma-separated integers, got '{text}'") from None


@ablate_app.command("depth-width")
@run_settings(exclude=("n", *ADAPTIVE))
def depth_width_command(
    out: Annotated[Path, Opt(help="grid folder: sub-runs, grid.csv/json, PNG plots (resumable)")] = Path("ablation"),
    rounds: Annotated[int, Opt("--rounds", "-T", help="TRT depth; every t <= T comes from one run")] = 8,
    widths: Annotated[str, Opt(help="TRT widths K, comma-separated")] = "1,2,4",
    majority_n: Annotated[int, Opt(help="majority samples; every k <= n comes from one run")] = 32,
    rsa_opt: Annotated[
        list[str] | None, Opt("--rsa-opt", help="RSA option KEY=VALUE as in `run --method rsa` (population, ...)")
    ] = None,
    no_rsa: Annotated[bool, Opt("--no-rsa", help="leave RSA out of the grid")] = False,
    ttrl: Annotated[
        bool, Opt("--ttrl", help="add one TTRL run (local models), placed at all its tokens, training included")
    ] = False,
    ttrl_opt: Annotated[list[str] | None, Opt("--ttrl-opt", help="TTRL option KEY=VALUE (e.g. preset=cpu)")] = None,
    method_opt: Annotated[list[str] | None, Opt("--method-opt", help="TRT option KEY=VALUE for every width")] = None,
    *,
    flags: SharedFlags,
) -> None:
    """TRT over (T, K) beside majority and RSA, on accuracy-vs-rollouts and accuracy-vs-tokens plots.

    RSA takes the options and defaults of `run --method rsa` (population 16, aggregate 4, steps 10). With
    --ttrl, one TTRL run joins the grid at all its tokens (rollouts, votes, training, its answer), beside
    majority and TRT at the same tokens. --max-cost and --max-tokens-total are one budget for the whole grid."""
    from rich.table import Table

    from testtime.cli.display import RunProgress, console, results_console
    from testtime.core.options import parse_options
    from testtime.experiments.ablate import Grid, depth_width
    from testtime.methods.rsa import RSAOptions
    from testtime.methods.trt.method import TRTOptions
    from testtime.methods.ttrl.recipe import TTRLSettings

    rsa = None if no_rsa else parse_options(rsa_opt or [], "--rsa-opt")
    if rsa is not None:
        RSAOptions.parse(rsa, "rsa")  # a bad shape fails before any sub-run starts
    trt_options = parse_options(method_opt or [], "--method-opt")
    TRTOptions.parse({**trt_options, "rounds": rounds}, "trt")
    ttrl_options = parse_options(ttrl_opt or [], "--ttrl-opt") if ttrl else None
    if ttrl_options is not None:
        TTRLSettings.from_options(ttrl_options)
    grid = Grid(
        base=flags.settings("majority", {}),
        rounds=rounds,
        widths=_ints(widths, "--widths"),
        majority_n=majority_n,
        rsa=rsa,
        trt_options=trt_options,
        ttrl=ttrl_options,
    )
    points, images = depth_width(grid, out, observe=lambda: RunProgress(flags.progress), log=console.print)
    table = Table("series", "rollouts/problem", "tokens/problem", "accuracy", "95% CI", title=f"depth × width: {out}")
    for p in points:
        table.add_row(
            p.series, f"{p.rollouts:g}", f"{p.tokens:,.0f}", f"{p.accuracy:.3f}", f"[{p.ci_low:.3f}, {p.ci_high:.3f}]"
        )
    results_console.print(table)
    console.print(
        f"wrote {out / 'grid.csv'}, {out / 'grid.json'}, " + ", ".join(str(i) for i in images), soft_wrap=True
    )


@ablate_app.command("adaptive")
@run_settings(exclude=("adaptive", "adaptive_threshold"))
def adaptive_command(
    out: Annotated[Path, Opt(help="sweep folder: the fixed run, sweep.csv/json, PNG plots (resumable)")] = Path(
        "ablation-adaptive"
    ),
    thresholds: Annotated[
        str, Opt(help="the rule's thresholds, comma-separated (posterior: confidences; window: samples)")
    ] = "0.8,0.9,0.95,0.99",
    *,
    flags: SharedFlags,
) -> None:
    """An early-stopping rule (--adaptive-rule) at several thresholds beside majority, as accuracy against tokens.

    One fixed majority run at --n (the cap) is paid for; each threshold is read off its recorded samples, which
    are exactly the samples an adaptive run draws first (same seeds), so the sweep costs that one run."""
    from rich.table import Table

    from testtime.cli.display import RunProgress, console, results_console
    from testtime.experiments.adaptive_sweep import sweep, sweep_rules

    base = flags.settings("majority", {})
    rules = sweep_rules(base, thresholds)
    points, images = sweep(base, rules, out, observe=lambda: RunProgress(flags.progress))
    table = Table("series", "samples/problem", "tokens/problem", "accuracy", "95% CI", title=f"adaptive sweep: {out}")
    for p in points:
        table.add_row(
            p.series, f"{p.rollouts:.2f}", f"{p.tokens:,.0f}", f"{p.accuracy:.3f}", f"[{p.ci_low:.3f}, {p.ci_high:.3f}]"
        )
    results_console.print(table)
    console.print(f"wrote {out / 'sweep.csv'}, {out / 'sweep.json'}, " + ", ".join(map(str, images)), soft_wrap=True)


def report_command(
    runs: Annotated[list[Path], typer.Argument(help="run directories, or folders of runs, to compare")],
    out: Annotated[Path, Opt(help="folder for report.json and comparison.png")] = Path("report"),
    as_json: Annotated[bool, Opt("--json", help="print the report as one JSON object")] = False,
) -> None:
    """Compare runs side by side, each beside two majority baselines: at its solver rollouts, and at its tokens.

    Only a majority run with the same benchmark, problems, model and solver sampling is used; "same budget"
    is said only when the baseline's tokens come within 10% of the run's."""
    from rich.table import Table

    from testtime.cli.display import console, results_console
    from testtime.experiments.report import build_report, plot_prequential, plot_report
    from testtime.experiments.runs import find_runs

    report = build_report(find_runs(runs))
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(report.model_dump_json(indent=2) + "\n")
    image = plot_report(report, out / "comparison.png")
    curves = plot_prequential(report, out / "prequential.png")
    if as_json:
        typer.echo(report.model_dump_json())
        return
    table = Table(
        "run", "method", "accuracy [95% CI]", "majority, same solver rollouts", "majority, same tokens",
        "calls", "tokens", "cost",
    )  # fmt: skip
    unpaired = []
    for row in report.runs:
        acc = row.accuracy
        shown = []
        for base in (row.majority_same_rollouts, row.majority_same_tokens):
            if base is not None and base.accuracy is not None:
                d = base.difference
                budget = "same budget" if base.exact_budget else "not the same budget"
                versus = f"; run − it {d.mean:+.3f} [{d.ci_low:+.3f}, {d.ci_high:+.3f}]" if d else ""
                spread = f" [{base.ci_low:.3f}, {base.ci_high:.3f}]" if base.ci_low is not None else ""
                shown.append(f"{base.accuracy:.3f}{spread} at k={base.k} ({budget}){versus}")
            elif base is not None:
                shown.append("-")
                unpaired.append(f"{Path(row.run).name}: {base.none}")
            else:
                shown.append("-")
        cost = f"${row.cost_usd:.4f}" if row.cost_usd is not None else f"≥ ${row.known_cost_usd:.4f} (unknown prices)"
        table.add_row(
            Path(row.run).name,
            row.method + (" (uses labels)" if row.uses_labels else "") + (" (stream)" if row.prequential else ""),
            f"{acc.mean:.3f} [{acc.ci_low:.3f}, {acc.ci_high:.3f}]" if acc else "not measured",
            *shown,
            str(row.calls),
            f"{row.tokens:,}",
            cost,
        )
    results_console.print(table)
    for row in report.runs:
        paired = row.adaptive_vs_fixed
        if paired is not None and paired.difference is not None and paired.fixed_run is not None:
            d, tokens = paired.difference, f"{paired.tokens_ratio:.2f}" if paired.tokens_ratio is not None else "?"
            console.print(
                f"adaptive {Path(row.run).name} vs fixed {Path(paired.fixed_run).name} on {paired.problems} "
                f"problems: accuracy {d.mean:+.3f} [{d.ci_low:+.3f}, {d.ci_high:+.3f}] (paired), tokens "
                f"{tokens}× the fixed run's",
                soft_wrap=True,
                highlight=False,
            )
        elif paired is not None:
            unpaired.append(f"{Path(row.run).name}: {paired.none} (no fixed run to pair the adaptive one with)")
    for row in report.runs:
        k = row.trt_knowledge
        if k is not None:
            lessons = "no knowledge list" if k.lessons_entered is None else f"{k.lessons_entered} lessons entered"
            empty = " [yellow](the knowledge list stayed empty)[/yellow]" if k.lessons_entered == 0 else ""
            console.print(
                f"trt knowledge of {escape(Path(row.run).name)}: strategy lists parsed {k.strategy_lists_parsed}/"
                f"{k.strategy_lists}, reflections parsed {k.reflections_parsed}/{k.reflections}, {lessons}{empty}",
                soft_wrap=True,
                highlight=False,
            )
    for row in report.runs:
        if row.prequential is not None:
            console.print(_prequential_line(row.run, row.prequential), soft_wrap=True, highlight=False)
    for line in dict.fromkeys(unpaired):  # both budgets give the same reason: say it once
        console.print(f"[yellow]no same-budget majority for {escape(line)}[/yellow]", soft_wrap=True)
    for left in report.unfinished:
        console.print(
            f"[yellow]unfinished, not compared: {escape(left.run)} ({left.kind} {left.method}, {left.answered} "
            f"answered); continue it with {escape(left.continue_with)}[/yellow]",
            soft_wrap=True,
        )
    console.print(f"wrote {out / 'report.json'}, {image}" + (f" and {curves}" if curves else ""), soft_wrap=True)


def view_command(
    runs: Annotated[list[Path], typer.Argument(help="run directories, or folders of runs (every run below)")],
    html: Annotated[Path | None, Opt(help="write one self-contained page here instead of serving")] = None,
    port: Annotated[int, Opt(help="port on 127.0.0.1 (0: any free one)")] = 8765,
) -> None:
    """Read runs: per problem its candidates, classes and votes; TRT rounds (strategies, knowledge, reflection,
    refutations, evidence); code verdict matrices; TTRL votes and curves; cost per problem."""
    import time

    from testtime.cli.display import console
    from testtime.experiments.runs import find_runs
    from testtime.experiments.viewer import Viewer, load, static_page

    loaded = load(find_runs(runs))
    if html is not None:
        html.write_text(static_page(loaded), encoding="utf-8")
        console.print(f"wrote {html}", soft_wrap=True)
        return
    try:
        viewer = Viewer(loaded, port)
    except OSError as exc:
        raise UserError(f"cannot listen on 127.0.0.1:{port} ({exc.strerror}); try --port 0") from None
    with viewer:
        console.print(f"viewing {len(loaded)} run(s) at {viewer.url} (Ctrl-C stops)", soft_wrap=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return


def export_command(
    run: Annotated[Path, typer.Argument(help="the run directory")],
    out: Annotated[
        str, Opt(help="the log file (.eval, or .json), or a folder (DIR/ or one that exists): <run>.eval in it")
    ],
    format: Annotated[
        str, Opt("--format", help="inspect (an inspect_ai eval log: `inspect view` opens it)")
    ] = "inspect",
) -> None:
    """Write a run in another tool's format."""
    from testtime.cli.display import console
    from testtime.experiments.export import export

    written = export(run, out, format)
    console.print(f"wrote {written}", soft_wrap=True)


def runs_command(
    paths: Annotated[list[Path], typer.Argument(help="run directories, or folders of runs (every run below)")],
    csv: Annotated[bool, Opt("--csv", help="one CSV row per (run, problem) on stdout, predictions as text")] = False,
) -> None:
    """List runs (one row each), or with --csv every (run, problem): prediction, grade, label-free confidence,
    calls, tokens, cost. In Python: `testtime.load_runs(PATH)` gives the same rows as a pandas DataFrame."""
    import csv as csv_module
    import sys

    from rich.table import Table

    from testtime.cli.display import results_console
    from testtime.experiments.runs import COLUMNS, listing

    rows, unanswered = listing(paths)
    if csv:
        writer = csv_module.DictWriter(sys.stdout, fieldnames=list(COLUMNS), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return
    table = Table("run", "kind", "method", "bench", "model", "problems", "graded", "correct", "tokens", "cost")
    by_run: dict[str, list[dict]] = {}
    for row in rows:
        by_run.setdefault(row["run"], []).append(row)
    for name, found in by_run.items():
        graded = [r for r in found if r["correct"] is not None]
        costs = [r["cost_usd"] for r in found]
        first = found[0]
        kind = first["kind"] if first["finished"] else f"{first['kind']}, unfinished"
        methods = "+".join(dict.fromkeys(r["method"] for r in found))  # a served run: each that answered
        table.add_row(
            escape(name), kind, methods, escape(first["bench"]), escape(first["model"]),
            str(len(found)), str(len(graded)), str(sum(bool(r["correct"]) for r in graded)) if graded else "-",
            f"{sum(r['tokens'] for r in found):,}",
            "unknown" if any(c is None for c in costs) else f"${sum(costs):.4f}",
        )  # fmt: skip
    for empty in unanswered:  # no problem answered yet: no row above, but a run all the same
        kind = empty["kind"] if empty["finished"] else f"{empty['kind']}, unfinished"
        table.add_row(escape(empty["run"]), kind, empty["method"], escape(empty["bench"]), escape(empty["model"]),
                      "0", "0", "-", "0", "-")  # fmt: skip
    results_console.print(table)


def _prequential_line(run: str, stream: PrequentialSummary) -> str:
    """A stream's (or a learning server's) accuracy over its arrival order, and by window with the learner's state."""
    served = stream.order == "served"
    acc = stream.accuracy
    if acc is not None:
        accuracy = f"{acc.mean:.3f} [{acc.ci_low:.3f}, {acc.ci_high:.3f}]"
    else:
        accuracy = "not graded" + (f" (label it: testtime grade --run {run} --bench ...)" if served else "")
    windows = ", ".join(
        f"{w.first}-{w.last}: {'-' if w.accuracy is None else f'{w.accuracy.mean:.2f}'} (state {w.state})"
        for w in stream.windows
    )
    kind = "requests" if served else "arrivals"
    return (
        f"prequential accuracy of {escape(Path(run).name)}: {accuracy} over {stream.arrivals} {kind}, "
        f"{stream.updates} updates (final state {stream.final_state}); by window: {windows}"
    )
