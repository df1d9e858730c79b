"""The `testtime` command: `run`, `grade`, `list`. Heavy libraries load only when a command needs them."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from testtime.core.errors import UserError
from testtime.models import DEFAULT_MODEL

app = typer.Typer(
    help="Make a language model better at a set of problems at test time, without labels.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

Opt = typer.Option

# LiveCodeBench selection flags (shorthands for --bench-opt KEY=VALUE)
Release = Annotated[str | None, Opt(help="lcb: release_v6 (cumulative), v6 (slice), vA_vB")]
StartDate = Annotated[str | None, Opt(help="lcb: first contest date, YYYY-MM-DD, inclusive")]
EndDate = Annotated[str | None, Opt(help="lcb: last contest date, YYYY-MM-DD, inclusive")]
Difficulty = Annotated[str | None, Opt(help="lcb: easy | medium | hard")]
Platform = Annotated[str | None, Opt(help="lcb: atcoder | leetcode | codeforces")]


def _with_flags(pairs: list[str] | None, **flags: object) -> list[str]:
    """KEY=VALUE pairs from --bench-opt/--method-opt plus the dedicated flags that were given."""
    return [*(pairs or []), *(f"{key}={value}" for key, value in flags.items() if value is not None)]


def _add_subcommands() -> None:
    from testtime.cli_experiments import ablate_app, export_command, report_command, view_command
    from testtime.cli_sandbox import sandbox_app
    from testtime.cli_ttrl import ttrl_app

    app.add_typer(sandbox_app, name="sandbox")
    app.add_typer(ablate_app, name="ablate")
    app.add_typer(ttrl_app, name="ttrl")
    app.command("report")(report_command)
    app.command("view")(view_command)
    app.command("export")(export_command)


def _method_help() -> str:
    from testtime.experiments.flags import help_text
    from testtime.methods import METHODS, load_methods

    load_methods()
    return help_text({name: METHODS.get(name).Options for name in METHODS.names()})  # type: ignore[attr-defined]


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    epilog=_method_help(),
)
def run(
    ctx: typer.Context,
    method: Annotated[str, Opt(help="single | majority | trt | rsa | ttrl (see `testtime list`)")] = "majority",
    bench: Annotated[str, Opt(help="aime24 | aime25 | amc23 | math500 | arith | lcb-v6")] = "arith",
    model: Annotated[str, Opt(help="hf:<path|alias>, litellm:<provider/model>, vllm:<path>, fake:...")] = DEFAULT_MODEL,
    n: Annotated[int | None, Opt(help="samples per problem (majority, default 8; ttrl: evaluation samples)")] = None,
    limit: Annotated[int | None, Opt(help="only the first N problems")] = None,
    seed: Annotated[int, Opt(help="base seed; every sample derives its own")] = 0,
    temperature: Annotated[float | None, Opt(help="0 = greedy (default 0.7)")] = None,
    top_p: Annotated[float | None, Opt(help="nucleus sampling (default 1.0)")] = None,
    max_tokens: Annotated[int | None, Opt(help="max new tokens per sample (default 512)")] = None,
    concurrency: Annotated[
        int, Opt(help="model calls in flight (also the local batch size: 64 suits hf: on CPU)")
    ] = 16,
    out: Annotated[Path | None, Opt(help="run directory (default runs/<time>-<method>-<bench>-<model>)")] = None,
    resume: Annotated[
        Path | None, Opt(help="continue a killed or stopped run here; only --max-cost/--max-tokens-total may change")
    ] = None,
    replay: Annotated[Path | None, Opt(help="re-score a run from its cache, making no model call")] = None,
    no_retry_errors: Annotated[
        bool, Opt("--no-retry-errors", help="with --resume: keep failed samples as they are instead of asking again")
    ] = False,
    data_dir: Annotated[str | None, Opt(help="folder with <bench>.jsonl (or $TESTTIME_DATA_DIR); default: hub")] = None,
    bench_opt: Annotated[list[str] | None, Opt("--bench-opt", help="benchmark option KEY=VALUE, repeatable")] = None,
    method_opt: Annotated[list[str] | None, Opt("--method-opt", help="method option KEY=VALUE, repeatable")] = None,
    selector: Annotated[
        str | None, Opt(help="majority | exclusivity | execution (default: by method and domain)")
    ] = None,
    selector_opt: Annotated[list[str] | None, Opt("--selector-opt", help="selector option KEY=VALUE")] = None,
    api_base: Annotated[
        list[str] | None,
        Opt(help="OpenAI-compatible server URL (litellm:, openai:); repeat it, or name a file of URLs, for a fleet"),
    ] = None,
    api_key_env: Annotated[str | None, Opt(help="env var holding the API key (never written to disk)")] = None,
    request_timeout: Annotated[float, Opt(help="seconds one attempt of a model call may take, then retried")] = 600.0,
    sandbox: Annotated[str, Opt(help="code benchmarks: auto | docker | bwrap (never the bare host)")] = "auto",
    release: Release = None,
    start_date: StartDate = None,
    end_date: EndDate = None,
    difficulty: Difficulty = None,
    platform: Platform = None,
    max_cost: Annotated[float | None, Opt(help="stop cleanly at this spend (USD); resume with a larger one")] = None,
    max_tokens_total: Annotated[int | None, Opt(help="stop cleanly at this many tokens; resumable")] = None,
    quiet: Annotated[bool, Opt(help="no progress bar")] = False,
) -> None:
    """Run a method on a benchmark; results, ledger, cache and summary go to a run directory.

    A method's own flags (e.g. trt's --rounds/-T, --rollouts/-K, --no-strategies; ttrl's --preset, --steps)
    are listed below. ttrl trains the local model on the problems (label-free) and evaluates it before and
    after; try `--method ttrl --preset cpu` on the embedded model.
    """
    from pydantic import ValidationError

    from testtime.core.errors import first_error
    from testtime.core.rundir import RunDir
    from testtime.experiments.config import RunConfig, api_bases, method_options, parse_options
    from testtime.experiments.display import (
        EXIT_ALL_FAILED,
        all_failed,
        console,
        results_console,
        summary_table,
        warnings_for,
    )
    from testtime.experiments.run import execute, start_run

    if resume and replay:
        raise UserError("use either --resume or --replay, not both")
    parts = None
    if resume:
        target, replay_of = RunDir.open_existing(resume), None
        if max_cost is not None or max_tokens_total is not None:  # the one thing a resume may change: budgets
            saved = target.read_config()
            saved["run"].update(
                {k: v for k, v in (("max_cost", max_cost), ("max_tokens_total", max_tokens_total)) if v is not None}
            )
            target.write_config(saved)
    elif replay:
        replay_of = RunDir.open_existing(replay)
        target = RunDir.create(replay / f"replay-{time.strftime('%Y%m%d-%H%M%S')}")
    else:
        options = method_options(method, ctx.args, method_opt or [], selector, selector_opt or [])
        try:
            config = RunConfig(
                method=method,
                bench=bench,
                model=model,
                n=n,
                limit=limit,
                seed=seed,
                temperature=temperature,
                top_p=top_p,
                max_tokens=max_tokens,
                concurrency=concurrency,
                data_dir=data_dir,
                bench_options=parse_options(
                    _with_flags(
                        bench_opt,
                        release=release,
                        start_date=start_date,
                        end_date=end_date,
                        difficulty=difficulty,
                        platform=platform,
                    ),
                    "--bench-opt",
                ),
                method_options=options,
                max_cost=max_cost,
                max_tokens_total=max_tokens_total,
                api_base=api_bases(api_base),
                api_key_env=api_key_env,
                request_timeout=request_timeout,
                sandbox=sandbox,
            )
        except ValidationError as exc:
            where, message = first_error(exc)
            raise UserError(f"--{where.replace('_', '-')}: {message}") from None
        (target, parts), replay_of = start_run(config, out), None
    console.print(f"run directory: [bold]{target.path}[/bold]", soft_wrap=True)
    try:
        summary = execute(
            target,
            parts=parts,
            replay_of=replay_of,
            progress=not quiet and sys.stderr.isatty(),
            retry_errors=not no_retry_errors,
        )
    except KeyboardInterrupt:
        console.print(
            f"[yellow]interrupted.[/yellow] Finished problems are saved; continue with:\n"
            f"  testtime run --resume {target.path}",
            soft_wrap=True,  # a wrapped command cannot be pasted
        )
        raise typer.Exit(130) from None
    results_console.print(summary_table(summary, f"{summary['method']} on {summary['bench']} · {summary['model']}"))
    for line in warnings_for(summary):
        console.print(f"[bold yellow]{escape(line)}[/bold yellow]", soft_wrap=True)
    if summary.get("stopped"):
        console.print(
            f"[yellow]stopped: {summary['stopped']}.[/yellow] Continue with a larger budget:\n"
            f"  testtime run --resume {target.path} --max-cost X --max-tokens-total N",
            soft_wrap=True,
        )
    console.print(f"summary: {target.summary_path}", soft_wrap=True)
    if all_failed(summary):
        raise typer.Exit(EXIT_ALL_FAILED)


@app.command()
def grade(
    bench: Annotated[str, Opt(help="benchmark whose references grade the predictions")],
    predictions: Annotated[Path, Opt(help='JSONL of {"id", "prediction"}: an answer or a whole completion')],
    data_dir: Annotated[str | None, Opt(help="folder with <bench>.jsonl (or $TESTTIME_DATA_DIR)")] = None,
    bench_opt: Annotated[list[str] | None, Opt("--bench-opt", help="benchmark option KEY=VALUE")] = None,
    as_json: Annotated[bool, Opt("--json", help="print one JSON object")] = False,
    out: Annotated[Path | None, Opt(help="also write the JSON summary to this file")] = None,
    release: Release = None,
    start_date: StartDate = None,
    end_date: EndDate = None,
    difficulty: Difficulty = None,
    platform: Platform = None,
) -> None:
    """Grade predictions from any system with this project's grader."""
    from testtime.experiments.display import console, results_console, summary_table, warnings_for
    from testtime.experiments.grading import grade_predictions

    options = _with_flags(
        bench_opt, release=release, start_date=start_date, end_date=end_date, difficulty=difficulty, platform=platform
    )
    report = grade_predictions(bench, predictions, data_dir, options)
    if out is not None:
        out.write_text(json.dumps(report, indent=2) + "\n")
    if as_json:
        typer.echo(json.dumps(report))
        return
    results_console.print(summary_table(report["summary"], f"{bench}: {predictions}"))
    for line in warnings_for(report["summary"]):
        console.print(f"[bold yellow]{escape(line)}[/bold yellow]", soft_wrap=True)
    if report["missing"]:
        console.print(f"[yellow]{len(report['missing'])} problems of {bench} have no prediction[/yellow]")


@app.command("list")
def list_registered() -> None:
    """List methods, benchmarks, model providers and embedded model aliases."""
    from rich.table import Table

    from testtime.benchmarks import BENCHMARKS, load_benchmarks
    from testtime.experiments.display import results_console
    from testtime.methods import METHODS, load_methods
    from testtime.models import MODELS, load_backends
    from testtime.models.hf import EMBEDDED
    from testtime.selectors import SELECTORS, load_selectors

    load_benchmarks(), load_methods(), load_backends(), load_selectors()
    table = Table("kind", "name", "what")
    for kind, registry in (
        ("method", METHODS),
        ("selector", SELECTORS),
        ("benchmark", BENCHMARKS),
        ("model provider", MODELS),
    ):
        for name, text in registry.describe().items():
            table.add_row(kind, name, escape(text))
    for alias, (_, gguf, requirement) in EMBEDDED.items():
        table.add_row(
            "model alias",
            f"hf:{alias}",
            f"embedded default, {gguf} from {requirement}"
            if f"hf:{alias}" == DEFAULT_MODEL
            else f"{gguf} from {requirement}",
        )
    results_console.print(table)
    owners = [(f"method {n}", METHODS.get(n).Options) for n in METHODS.names()]  # type: ignore[attr-defined]
    owners += [(f"selector {n}", SELECTORS.get(n).Options) for n in SELECTORS.names()]  # type: ignore[attr-defined]
    for owner, options in owners:
        rows = [row for row in options.help_rows() if row[0] != "selector_options"]
        if rows:
            listing = Table(
                "option (flags)", "default", "what", title=f"{owner}: --method-opt / --selector-opt KEY=VALUE"
            )
            for label, default, text in rows:
                listing.add_row(escape(label), escape(default), escape(text))
            results_console.print(listing)


_add_subcommands()


def main(argv: list[str] | None = None) -> Any:
    try:
        return app(args=argv, standalone_mode=True)
    except UserError as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
