"""`testtime ablate depth-width` and `testtime report`: compute-matched comparisons from run ledgers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from testtime.core.errors import UserError
from testtime.models import DEFAULT_MODEL

ablate_app = typer.Typer(help="Sweeps at matched compute, measured by the ledger.", no_args_is_help=True)
Opt = typer.Option


def _ints(text: str, flag: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UserError(f"{flag} expects comma-separated integers, got '{text}'") from None


@ablate_app.command("depth-width")
def depth_width_command(
    bench: Annotated[str, Opt(help="benchmark")] = "arith",
    model: Annotated[str, Opt(help="model spec")] = DEFAULT_MODEL,
    out: Annotated[Path, Opt(help="grid folder: sub-runs, grid.csv/json, PNG plots (resumable)")] = Path("ablation"),
    rounds: Annotated[int, Opt("--rounds", "-T", help="TRT depth; every t <= T comes from one run")] = 8,
    widths: Annotated[str, Opt(help="TRT widths K, comma-separated")] = "1,2,4",
    majority_n: Annotated[int, Opt(help="majority samples; every k <= n comes from one run")] = 32,
    rsa: Annotated[str, Opt(help="RSA N,K,T, or 'none'")] = "4,2,3",
    limit: Annotated[int | None, Opt(help="only the first N problems")] = None,
    data_dir: Annotated[str | None, Opt(help="folder with <bench>.jsonl")] = None,
    bench_opt: Annotated[list[str] | None, Opt("--bench-opt", help="benchmark option KEY=VALUE")] = None,
    temperature: Annotated[float, Opt()] = 0.7,
    max_tokens: Annotated[int, Opt()] = 512,
    concurrency: Annotated[int, Opt()] = 16,
    seed: Annotated[int, Opt()] = 0,
    api_base: Annotated[str | None, Opt()] = None,
    quiet: Annotated[bool, Opt(help="no progress bars")] = False,
) -> None:
    """TRT over (T, K) beside majority and RSA, on accuracy-vs-rollouts and accuracy-vs-tokens plots."""
    import sys

    from rich.table import Table

    from testtime.experiments.ablate import depth_width
    from testtime.experiments.config import parse_options
    from testtime.experiments.display import console, results_console

    rsa_shape = None
    if rsa.lower() != "none":
        parts = _ints(rsa, "--rsa")
        if len(parts) != 3:
            raise UserError("--rsa expects N,K,T (e.g. 16,4,10) or 'none'")
        rsa_shape = (parts[0], parts[1], parts[2])
    base = {
        "bench": bench,
        "model": model,
        "limit": limit,
        "data_dir": data_dir,
        "temperature": temperature,
        "max_tokens": max_tokens,
        "concurrency": concurrency,
        "seed": seed,
        "api_base": api_base,
        "bench_options": parse_options(bench_opt or [], "--bench-opt"),
    }
    points, images = depth_width(
        base,
        out,
        rounds,
        _ints(widths, "--widths"),
        majority_n,
        rsa_shape,
        progress=not quiet and sys.stderr.isatty(),
        log=console.print,
    )
    table = Table("series", "rollouts/problem", "tokens/problem", "accuracy", "95% CI", title=f"depth × width: {out}")
    for p in points:
        table.add_row(
            p.series, f"{p.rollouts:g}", f"{p.tokens:,.0f}", f"{p.accuracy:.3f}", f"[{p.ci_low:.3f}, {p.ci_high:.3f}]"
        )
    results_console.print(table)
    console.print(
        f"wrote {out / 'grid.csv'}, {out / 'grid.json'}, " + ", ".join(str(i) for i in images), soft_wrap=True
    )


def report_command(
    runs: Annotated[list[Path], typer.Argument(help="run directories to compare")],
    out: Annotated[Path, Opt(help="folder for report.json and comparison.png")] = Path("report"),
    as_json: Annotated[bool, Opt("--json", help="print the report as one JSON object")] = False,
) -> None:
    """Compare runs side by side, each beside a majority baseline at the same rollout budget."""
    from rich.table import Table

    from testtime.experiments.display import console, results_console
    from testtime.experiments.report import build_report, plot_report

    report = build_report(runs)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    image = plot_report(report, out / "comparison.png")
    if as_json:
        typer.echo(json.dumps(report))
        return
    table = Table(
        "run", "method", "accuracy [95% CI]", "majority @ same budget", "calls", "tokens", "cost", "sandbox s"
    )
    for row in report["runs"]:
        acc = row["accuracy"]
        base = row["same_budget_majority"]
        baseline = f"{base['accuracy']:.3f} (k={base['k']})" if base else "-"
        cost = f"${row['cost_usd']:.4f}" + ("" if row["cost_known"] else "+?")
        table.add_row(
            Path(row["run"]).name,
            row["method"],
            f"{acc['mean']:.3f} [{acc['ci_low']:.3f}, {acc['ci_high']:.3f}]",
            baseline,
            str(row["calls"]),
            f"{row['tokens']:,}",
            cost,
            f"{row['sandbox_seconds']:.1f}",
        )
    results_console.print(table)
    console.print(f"wrote {out / 'report.json'} and {image}", soft_wrap=True)
