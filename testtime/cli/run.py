"""`testtime run`, `testtime grade` and `testtime list`. Heavy libraries load only when a command needs them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from testtime.cli.shared_flags import SharedFlags, run_settings
from testtime.core.errors import UserError

if TYPE_CHECKING:
    from testtime.evaluation.summary import RunSummary
    from testtime.run.lifecycle import OpenRun

Opt = typer.Option


def run_help() -> str:
    """Each method's and benchmark's own flags, for the epilog of `run --help`."""
    from testtime.benchmarks import BENCHMARKS, load_benchmarks
    from testtime.cli.flags import help_text
    from testtime.methods import METHODS, load_methods

    load_methods(), load_benchmarks()
    owners = {f"--method {name}": METHODS.get(name).Options for name in METHODS.names()}  # type: ignore[attr-defined]
    owners |= {f"--bench {name}": BENCHMARKS.get(name).Options for name in BENCHMARKS.names()}  # type: ignore[attr-defined]
    return help_text(owners)


@run_settings()
def run_command(
    ctx: typer.Context,
    method: Annotated[str, Opt(help="a registered method (`testtime list` names them)")] = "majority",
    method_opt: Annotated[list[str] | None, Opt("--method-opt", help="method option KEY=VALUE, repeatable")] = None,
    selector: Annotated[
        str | None,
        Opt(help="a registered selector (`testtime list`; default: by method and domain)"),
    ] = None,
    selector_opt: Annotated[list[str] | None, Opt("--selector-opt", help="selector option KEY=VALUE")] = None,
    out: Annotated[Path | None, Opt(help="run directory (default runs/<time>-<method>-<bench>-<model>)")] = None,
    resume: Annotated[
        Path | None,
        Opt(help="continue a killed or stopped run; budgets, --api-base, timeout and concurrency may change"),
    ] = None,
    replay: Annotated[Path | None, Opt(help="re-score a run from its cache, making no model call")] = None,
    stream: Annotated[
        bool,
        Opt(
            "--stream",
            help="problems arrive one at a time, each answered before anything is learned from it (online ttrl, "
            "trt --method-opt memory=shared); --bench - reads them from standard input, one JSON object a line",
        ),
    ] = False,
    shuffle: Annotated[bool, Opt("--shuffle", help="with --stream: arrive in a shuffle seeded by --seed")] = False,
    shard: Annotated[
        str | None,
        Opt(
            help="only shard I of N (1-based): every N-th problem from the I-th, into its own run; testtime merge joins"
        ),
    ] = None,
    ray: Annotated[
        str | None,
        Opt(
            help="run as --shards Ray tasks, merged into --out: local (a Ray of this process), auto (RAY_ADDRESS), "
            "HOST:PORT or ray://HOST:10001; --out must be on a filesystem every node mounts"
        ),
    ] = None,
    shards: Annotated[int | None, Opt(help="with --ray: how many shards (default: the cluster's CPUs)")] = None,
    no_retry_errors: Annotated[
        bool, Opt("--no-retry-errors", help="with --resume: keep failed samples as they are instead of asking again")
    ] = False,
    *,
    flags: SharedFlags,
) -> None:
    """Run a method on a benchmark; manifest, results, ledger, cache, trace and summary go to a run directory.

    A method's and a benchmark's own flags (trt's --rounds/-T, --rollouts/-K; ttrl's --preset, --steps;
    lcb-v6's --release, --difficulty) are listed below. ttrl trains the local model on the problems
    (label-free) and evaluates it before and after; try `--method ttrl --preset cpu` on the embedded model.
    """
    import signal
    import sqlite3

    from testtime.api import execute_run
    from testtime.cli.display import (
        EXIT_ALL_FAILED,
        EXIT_STOPPED,
        RunProgress,
        command,
        console,
        show_model_notices,
    )
    from testtime.core.errors import Interrupted, storage_failure

    if resume and replay:
        raise UserError("use either --resume or --replay, not both")
    if shards is not None and ray is None:
        raise UserError("--shards says how many Ray tasks: add --ray ADDRESS (or run each with --shard I/N)")
    if ray is not None and (shard is not None or replay):
        raise UserError(
            "--ray runs every shard itself: leave out --shard" if shard else "--replay runs here, not on Ray"
        )
    if not flags.quiet:
        show_model_notices()  # the embedded model converts once (building the run) and loads on first use
    run = _open_run(
        ctx, flags, method=method, method_opt=method_opt, selector=selector, selector_opt=selector_opt, out=out,
        resume=resume, replay=replay, stream=stream, shuffle=shuffle, shard=shard, ray=ray, shards=shards,
    )  # fmt: skip
    for note in run.notes:
        console.print(f"[yellow]{escape(note)}[/yellow]", soft_wrap=True)
    console.print(f"run directory: [bold]{run.path}[/bold]", soft_wrap=True)
    try:
        summary = execute_run(run, RunProgress(enabled=flags.progress), retry_errors=not no_retry_errors, ray=ray)
    except (Interrupted, KeyboardInterrupt) as exc:
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        console.print(
            f"[yellow]{escape(str(exc) or 'interrupted')}.[/yellow] Calls in flight were kept and finished problems "
            f"saved; continue with:\n  {command()} run --resume {run.path}",
            soft_wrap=True,  # a wrapped command cannot be pasted
        )
        raise typer.Exit(128 + signum) from None
    except (OSError, sqlite3.OperationalError) as exc:
        if not storage_failure(exc):
            raise
        raise UserError(
            f"cannot write to {run.path}: {exc}. Finished problems are saved; free some space, then continue "
            f"with: {command()} run --resume {run.path}"
        ) from None
    _show_outcome(summary, run.path, run.directory.summary_path)
    if summary.all_failed():
        raise typer.Exit(EXIT_ALL_FAILED)
    if summary.stopped is not None:  # a script must not take a budget-stopped run for a finished one
        raise typer.Exit(EXIT_STOPPED)


def _open_run(
    ctx: typer.Context,
    flags: SharedFlags,
    *,
    method: str,
    method_opt: list[str] | None,
    selector: str | None,
    selector_opt: list[str] | None,
    out: Path | None,
    resume: Path | None,
    replay: Path | None,
    stream: bool,
    shuffle: bool,
    shard: str | None,
    ray: str | None,
    shards: int | None,
) -> OpenRun:
    """The run `run`'s flags ask for: a resumed one (with what may change), a replay, or a new one."""
    from testtime.cli.flags import run_options
    from testtime.run import lifecycle
    from testtime.run.settings import ResumeChanges

    if resume:
        changes = {k: getattr(flags, k) for k in ("max_cost", "max_tokens_total", "price", "api_key_env", "routing")}
        if flags.api_base:
            changes["api_base"] = flags.settings("single", {}).api_base
        if ctx.get_parameter_source("request_timeout").name == "COMMANDLINE":
            changes["request_timeout"] = flags.request_timeout
        if ctx.get_parameter_source("concurrency").name == "COMMANDLINE":
            changes["concurrency"] = flags.concurrency
        return lifecycle.resume(resume, ResumeChanges(**changes))
    if replay:
        return lifecycle.replay(replay)
    method_options, bench_flags = run_options(
        method, flags.bench, ctx.args, method_opt or [], selector, selector_opt or []
    )
    if shuffle and not (stream or flags.bench == "-"):
        raise UserError("--shuffle orders a stream: add --stream")
    if ray is not None and shards is None:
        shards = cluster_cpus(ray)
    settings = flags.settings(
        method, method_options, bench_options=bench_flags, stream=stream or flags.bench == "-", shuffle=shuffle,
        shard=shard, shards=shards if ray is not None else None,
    )  # fmt: skip
    return lifecycle.create(settings, out)


def _show_outcome(summary: RunSummary, path: Path, summary_path: Path) -> None:
    """The results table, its warnings, how to continue a stopped run, and where to look next."""
    from rich.markup import escape

    from testtime.cli.display import command, console, print_warnings, results_console, summary_table

    title = f"{summary.method} on {summary.bench} · {summary.model}"
    results_console.print(summary_table(summary, title, solver_sampling_flags(path)))
    print_warnings(summary)
    if summary.stopped:
        budget = "budget reached" in summary.stopped
        console.print(
            f"[yellow]stopped: {escape(summary.stopped)}.[/yellow] "
            + (
                f"Continue with a larger budget:\n  {command()} run --resume {path} --max-cost X --max-tokens-total N"
                if budget
                else f"Continue:\n  {command()} run --resume {path}"
            ),
            soft_wrap=True,
        )
    console.print(f"summary: {summary_path}", soft_wrap=True)
    console.print(
        f"next: {command()} view {path}   (every problem, its candidates and rounds)\n"
        f"      {command()} report {path} [OTHER RUNS...]   (runs side by side at matched compute)",
        soft_wrap=True,
    )


def solver_sampling_flags(path: Path) -> str:
    """The flags that sample a majority baseline as this run's solver sampled (` --temperature 0.6 --max-tokens
    32`): `testtime report` compares a run only with a majority run sampled alike."""
    from testtime.run.directory import RunDir

    effective = RunDir(path).read_manifest().effective
    solve = effective.sampling.get("solve") if effective else None
    if solve is None:
        return ""
    flags = f" --temperature {solve.temperature:g}" + (f" --top-p {solve.top_p:g}" if solve.top_p != 1 else "")
    return flags + f" --max-tokens {solve.max_tokens}"


def cluster_cpus(address: str) -> int:
    """--ray's default shard count: one per CPU of the cluster."""
    from testtime.run.ray_shards import connect

    return max(1, int(connect(address).cluster_resources().get("CPU", 1)))


def merge_command(
    runs: Annotated[list[Path], typer.Argument(help="the shard run directories (--shard 1/N ... N/N)")],
    out: Annotated[Path, Opt(help="the merged run directory (new or empty)")],
) -> None:
    """Merge the shards of one run (`run --shard I/N`) into one run directory, as if it had run unsharded:
    results in the unsharded order, every shard's ledger, trace and cache, the summary recomputed. Refuses
    shards of different runs, a shard given twice or missing, and unfinished shards."""
    from testtime.cli.display import console, print_warnings, results_console, summary_table
    from testtime.run.merge import merge_runs

    directory, summary = merge_runs(runs, out)
    results_console.print(summary_table(summary, f"{summary.method} on {summary.bench} · {summary.model}"))
    print_warnings(summary)
    console.print(f"merged {len(runs)} shards into {directory.path}", soft_wrap=True)


def grade_command(
    ctx: typer.Context,
    bench: Annotated[str, Opt(help="benchmark (or your JSONL file) whose labels grade the predictions")],
    predictions: Annotated[
        Path | None, Opt(help='JSONL of {"id", "prediction"}: an answer or a whole completion')
    ] = None,
    run: Annotated[
        Path | None,
        Opt(help="a served run (testtime serve --out): grade its requests by the questions asked (labels known later)"),
    ] = None,
    data_dir: Annotated[str | None, Opt(help="folder with <bench>.jsonl (or $TESTTIME_DATA_DIR)")] = None,
    bench_opt: Annotated[list[str] | None, Opt("--bench-opt", help="benchmark option KEY=VALUE")] = None,
    as_json: Annotated[bool, Opt("--json", help="print one JSON object")] = False,
    out: Annotated[Path | None, Opt(help="also write the JSON summary to this file")] = None,
) -> None:
    """Grade predictions from any system with this project's grader (the benchmark's own flags apply), or with
    --run a served run's requests once their labels are known (its predictions.jsonl as --predictions too): each
    is matched to the question it asked (by id, else by its words), its grade kept in the run's graded.jsonl and
    the run's summary written again (accuracy; a learning server's prequential accuracy over the requests, for
    `testtime report`)."""
    from testtime.cli.display import console, print_warnings, results_console, summary_table
    from testtime.cli.flags import bench_flags
    from testtime.core.options import parse_options
    from testtime.evaluation.summary import RunSummary
    from testtime.run.grading import grade_predictions, grade_served, served_run_of

    if (predictions is None) == (run is None):
        raise UserError("give --predictions FILE (answers from any system) or --run DIR (a served run), one of them")
    options = {**parse_options(bench_opt or [], "--bench-opt"), **bench_flags(bench, ctx.args)}
    if predictions is not None:
        run = served_run_of(predictions)
    if run is not None:
        report = grade_served(run, bench, data_dir, options)
    else:
        assert predictions is not None
        report = grade_predictions(bench, predictions, data_dir, options)
    if out is not None:
        out.write_text(json.dumps(report, indent=2) + "\n")
    if as_json:
        typer.echo(json.dumps(report))
        return
    summary = RunSummary.model_validate(report["summary"])
    results_console.print(summary_table(summary, f"{bench}: {run or predictions}"))
    print_warnings(summary)
    if report.get("missing"):
        console.print(f"[yellow]{len(report['missing'])} problems of {bench} have no prediction[/yellow]")
    if run is not None:
        unmatched = report["unmatched_requests"]
        console.print(
            f"graded {report['n']} requests of {run} against {bench}"
            + (f"; {unmatched} asked no question of it (left unlabelled)" if unmatched else "")
            + f"; summary written again: {run / 'summary.json'}",
            soft_wrap=True,
        )


def list_command() -> None:
    """List methods (with their default selector per domain), selectors, benchmarks, model providers, TTRL
    rewards, the plugins that added to them (each entry a plugin added names it), and model aliases."""
    from rich.table import Table

    from testtime.benchmarks import BENCHMARKS, load_benchmarks
    from testtime.cli.display import listing_console
    from testtime.core.plugins import loaded_plugins
    from testtime.core.registry import Registry
    from testtime.methods import METHODS, SelectorChoice, load_methods
    from testtime.methods.ttrl.rewards import REWARDS
    from testtime.models import DEFAULT_MODEL, MODELS, load_backends
    from testtime.models.hf import EMBEDDED
    from testtime.selectors import SELECTORS, load_selectors

    load_benchmarks(), load_methods(), load_backends(), load_selectors()
    results_console = listing_console()
    table = Table("kind", "name", "default selector", "what")

    def what(registry: Registry[Any], name: str, text: str) -> str:
        plugin = registry.plugin_of(name)
        return escape(text if plugin is None else f"{text} (plugin {plugin})")

    for name, text in METHODS.describe().items():
        method = METHODS.get(name)
        options = method.Options  # type: ignore[attr-defined]
        defaults = options.default_selectors.items() if issubclass(options, SelectorChoice) else ()
        table.add_row("method", name, "\n".join(f"{d}: {s}" for d, s in defaults) or "-", what(METHODS, name, text))
    kinds: list[tuple[str, Registry[Any]]] = [("selector", SELECTORS), ("benchmark", BENCHMARKS)]
    kinds += [("model provider", MODELS), ("ttrl reward", REWARDS)]
    for kind, registry in kinds:
        for name, text in registry.describe().items():
            table.add_row(kind, name, "", what(registry, name, text))
    for origin in loaded_plugins():
        table.add_row("plugin", escape(origin), "", "loaded (--plugin, TESTTIME_PLUGINS or a `testtime` entry point)")
    for alias, (_, gguf, requirement) in EMBEDDED.items():
        embedded = "embedded default, " if f"hf:{alias}" == DEFAULT_MODEL else ""
        table.add_row("model alias", f"hf:{alias}", "", f"{embedded}{gguf} from {requirement}")
    results_console.print(table)
    owners = [(f"method {n}", METHODS.get(n).Options, "--method-opt") for n in METHODS.names()]  # type: ignore[attr-defined]
    owners += [(f"selector {n}", SELECTORS.get(n).Options, "--selector-opt") for n in SELECTORS.names()]  # type: ignore[attr-defined]
    owners += [(f"benchmark {n}", BENCHMARKS.get(n).Options, "--bench-opt") for n in BENCHMARKS.names()]  # type: ignore[attr-defined]
    for owner, options, flag in owners:
        rows = [row for row in options.help_rows() if row[0] != "selector_options"]
        if rows:
            listing = Table("option (flags)", "default", "what", title=f"{owner}: {flag} KEY=VALUE")
            for label, default, text in rows:
                listing.add_row(escape(label), escape(default), escape(text))
            results_console.print(listing)
