"""`testtime ttrl verl`: prepare, check and launch a TTRL run on verl (a GPU cluster; the paper's 8×A100)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from testtime.core.errors import UserError

ttrl_app = typer.Typer(help="TTRL beyond one node.", no_args_is_help=True)
Opt = typer.Option


@ttrl_app.command("verl")
def verl_command(
    model: Annotated[str, Opt(help="HF model folder (or hub id the cluster can reach)")],
    bench: Annotated[str, Opt(help="math benchmark: aime24 | aime25 | amc23 | math500 | arith")] = "aime24",
    out: Annotated[Path, Opt(help="folder for the parquet data, overrides.txt, launch.sh and checkpoints")] = Path(
        "ttrl-verl"
    ),
    preset: Annotated[str, Opt(help="cluster preset: paper-8xa100")] = "paper-8xa100",
    limit: Annotated[int | None, Opt(help="only the first N problems")] = None,
    data_dir: Annotated[str | None, Opt(help="folder with <bench>.jsonl (or $TESTTIME_DATA_DIR)")] = None,
    bench_opt: Annotated[list[str] | None, Opt("--bench-opt", help="benchmark option KEY=VALUE")] = None,
    method_opt: Annotated[list[str] | None, Opt("--method-opt", help="TTRL setting KEY=VALUE (see run --help)")] = None,
    steps: Annotated[int | None, Opt(help="rollout steps (default: epochs over the problems)")] = None,
    n_train: Annotated[int | None, Opt(help="responses per prompt, voted and trained (paper 32)")] = None,
    lr: Annotated[float | None, Opt(help="learning rate (paper 5e-7)")] = None,
    set_: Annotated[list[str] | None, Opt("--set", help="extra verl override KEY=VALUE, repeatable")] = None,
    launch: Annotated[bool, Opt(help="start training now (needs GPUs, Ray and vLLM)")] = False,
) -> None:
    """Write verl's data and configuration for TTRL, check it with verl's own loader, and optionally launch.

    Labels never leave testtime: the parquet's ground truth is empty and the vote fills it at run time.
    After training, merge the FSDP checkpoint to a HF folder (verl.model_merger) and evaluate it with
    `testtime run --model hf:<folder>`.
    """
    from testtime.experiments.config import RunConfig, parse_options
    from testtime.experiments.run import build_benchmark, load_problems
    from testtime.methods.ttrl.settings import TTRLSettings
    from testtime.methods.ttrl.verl.config import compose, ttrl_overrides, validate
    from testtime.methods.ttrl.verl.data import verl_rows, write_parquet

    options = parse_options(method_opt or [], "--method-opt")
    options.update({k: str(v) for k, v in (("steps", steps), ("lr", lr)) if v is not None})
    if n_train is not None:
        options.update(n_train=str(n_train), n_vote=str(n_train))  # verl votes and trains the same responses
    settings = TTRLSettings.from_options(options).for_benchmark(bench, set(options))
    config = RunConfig(method="ttrl", bench=bench, model=f"hf:{model}", data_dir=data_dir, limit=limit)
    config.bench_options = parse_options(bench_opt or [], "--bench-opt")
    benchmark = build_benchmark(config)
    if benchmark.domain != "math":
        raise UserError("TTRL's vote needs comparable answers: use a math benchmark")
    problems, _ = load_problems(benchmark, limit)  # references stay here, unread
    train, val = write_parquet(verl_rows(problems, benchmark.prompt, f"testtime/{bench}"), out.resolve() / "data")
    extra = dict(pair.split("=", 1) for pair in (set_ or []) if "=" in pair)
    overrides = ttrl_overrides(
        settings,
        model_path=model,
        train_file=train,
        val_file=val,
        output_dir=out.resolve() / "checkpoints",
        preset=preset,
        extra=extra,
    )
    try:
        validate(compose(overrides))
    except (AssertionError, ValueError) as exc:
        raise UserError(f"verl rejects this configuration: {exc}") from None
    command = [sys.executable, "-m", "testtime.methods.ttrl.verl.trainer", *overrides]
    (out / "overrides.txt").write_text("\n".join(overrides) + "\n")
    script = out / "launch.sh"
    script.write_text("#!/bin/sh\nset -e\n" + shlex.join(command) + ' "$@"\n')
    script.chmod(0o755)
    caveat = (
        f"note: verl votes on and trains the same {settings.n_train} responses per prompt (rollout.n); TTRL's fork "
        "voted on 64 and trained 32: verl cannot drop responses between reward and update"
    )
    (out / "NOTES.txt").write_text(caveat + "\n")
    typer.echo(f"{len(problems)} problems → {train}\nverl accepted the configuration; launch with: {script}\n{caveat}")
    if launch:
        raise typer.Exit(subprocess.call(command))


@ttrl_app.command("controls")
def controls_command(
    out: Annotated[Path, Opt(help="folder for one sub-run per reward (resumable: run again to continue)")] = Path(
        "runs/ttrl-controls"
    ),
    rewards: Annotated[str, Opt(help="comma-separated: majority (TTRL) and controls random, format")] = (
        "majority,random,format"
    ),
    bench: Annotated[str, Opt(help="benchmark (default: the miniature's two-digit additions)")] = "arith",
    model: Annotated[str, Opt(help="local model to train")] = "hf:smollm2-135m",
    preset: Annotated[str, Opt(help="ttrl preset: cpu (the miniature) | paper")] = "cpu",
    steps: Annotated[int | None, Opt(help="rollout steps (default: the preset's)")] = None,
    limit: Annotated[int | None, Opt(help="only the first N problems")] = None,
    seed: Annotated[int, Opt()] = 0,
    concurrency: Annotated[int, Opt(help="evaluation batch of the local model (the miniature's: 64)")] = 64,
    data_dir: Annotated[str | None, Opt(help="folder with <bench>.jsonl (or $TESTTIME_DATA_DIR)")] = None,
    bench_opt: Annotated[list[str] | None, Opt("--bench-opt", help="benchmark option KEY=VALUE")] = None,
    method_opt: Annotated[list[str] | None, Opt("--method-opt", help="TTRL setting KEY=VALUE, for every run")] = None,
    quiet: Annotated[bool, Opt(help="no progress bars")] = False,
) -> None:
    """Train TTRL and control rewards (random, format) at identical settings; print each gain and TTRL − control.

    A gain means little until it stands beside what a signal-free reward gives the same model at the same steps
    and tokens (Spurious Rewards: random +21.4, format +13.8, majority +27.1 points on Qwen2.5-Math-7B).
    Defaults reproduce the CPU miniature (arith, 32 problems, embedded model, --preset cpu) per reward.
    """
    from testtime.experiments.config import RunConfig, parse_options
    from testtime.experiments.display import console
    from testtime.experiments.ttrl_controls import compare, report_lines, run_controls

    options = parse_options(method_opt or [], "--method-opt")
    if "reward" in options:
        raise UserError("controls set the reward themselves: choose them with --rewards")
    options["preset"] = preset
    if steps is not None:
        options["steps"] = str(steps)
    bench_options = parse_options(bench_opt or [], "--bench-opt")
    if bench == "arith" and not bench_options:
        bench_options = {"digits": "2", "size": "32"}  # the miniature's problems
    base = RunConfig(
        method="ttrl",
        bench=bench,
        model=model,
        seed=seed,
        limit=limit,
        data_dir=data_dir,
        bench_options=bench_options,
        method_options=options,
        concurrency=concurrency,
    )
    chosen = [r.strip() for r in rewards.split(",") if r.strip()]
    run_controls(base, out, chosen, progress=not quiet and sys.stderr.isatty(), log=console.print)
    typer.echo("\n".join(report_lines(compare(out, chosen, seed))))
