"""`testtime ttrl verl` (prepare, check and launch a TTRL run on verl: a GPU cluster, the paper's 8×A100),
`testtime ttrl compare` (TTRL with each reward, beside the controls and the oracle; `controls` is its older
name for the controls alone) and `testtime ttrl miniature` (the CPU proof)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from testtime.cli.shared_flags import ADAPTIVE, SharedFlags, run_settings
from testtime.core.errors import UserError
from testtime.run.settings import RunSettings

ttrl_app = typer.Typer(help="TTRL on a cluster, beside its controls, and its CPU miniature.", no_args_is_help=True)
Opt = typer.Option


VERL_ONLY = ("model", "n", "temperature", "top_p", "max_tokens", "concurrency", "api_base", "api_key_env")
VERL_ONLY += (
    "request_timeout",
    "sandbox",
    "max_cost",
    "max_tokens_total",
    "logprobs",
    "quiet",
    "routing",
    "n_per_request",
    *ADAPTIVE,
)


@ttrl_app.command("verl")
@run_settings(exclude=VERL_ONLY, defaults={"bench": "aime24"})
def verl_command(
    model: Annotated[str, Opt(help="HF model folder (or hub id the cluster can reach)")],
    out: Annotated[Path, Opt(help="folder for the parquet data, overrides.txt, launch.sh and checkpoints")] = Path(
        "ttrl-verl"
    ),
    preset: Annotated[str, Opt(help="cluster preset: paper-8xa100")] = "paper-8xa100",
    method_opt: Annotated[list[str] | None, Opt("--method-opt", help="TTRL setting KEY=VALUE (see run --help)")] = None,
    steps: Annotated[int | None, Opt(help="rollout steps (default: epochs over the problems)")] = None,
    n_train: Annotated[int | None, Opt(help="responses per prompt trained on: verl's rollout.n (paper 32)")] = None,
    n_vote: Annotated[
        int | None, Opt(help="responses per prompt voted on (paper 64); the extra ones are sampled to vote only")
    ] = None,
    nnodes: Annotated[int | None, Opt(help="nodes of the Ray cluster to train on (default: the preset's, 1)")] = None,
    gpus_per_node: Annotated[int | None, Opt(help="GPUs per node (default: the preset's, 8)")] = None,
    ray_address: Annotated[
        str | None,
        Opt(help="the cluster's job address (http://HEAD:8265) for submit.sh (default: $RAY_ADDRESS when it runs)"),
    ] = None,
    lr: Annotated[float | None, Opt(help="learning rate (paper 5e-7)")] = None,
    set_: Annotated[list[str] | None, Opt("--set", help="extra verl override KEY=VALUE, repeatable")] = None,
    launch: Annotated[bool, Opt(help="start training now (needs GPUs, Ray and vLLM)")] = False,
    *,
    flags: SharedFlags,
) -> None:
    """Write verl's data and configuration for TTRL, check it with verl's own loader, and optionally launch.

    Labels never leave testtime: the parquet's ground truth is empty and the vote fills it at run time. The
    trainer reads the same typed TTRL settings as `run --method ttrl` (ttrl_settings.json: selector and its
    options, vote policy, reward). Math and code benchmarks (code: the vote runs programs in the node's
    sandbox). It also writes evaluate.sh: merge a checkpoint (verl.model_merger) and evaluate it with TTRL's
    protocol (avg@16 and maj@16 at T=0.6, top-p 0.95, 3,072 tokens), the command printed.
    """
    from testtime.core.options import parse_options
    from testtime.methods.ttrl.recipe import TTRLSettings
    from testtime.methods.ttrl.verl.config import (
        cluster,
        compose,
        submit_script,
        ttrl_overrides,
        validate,
        write_settings,
    )
    from testtime.methods.ttrl.verl.data import verl_rows, write_parquet
    from testtime.run.build import build_benchmark, load_problems

    cluster(nnodes, gpus_per_node)  # a bad shape fails before anything is written
    options = parse_options(method_opt or [], "--method-opt")
    given = (("steps", steps), ("lr", lr), ("n_train", n_train), ("n_vote", n_vote))
    options.update({k: str(v) for k, v in given if v is not None})
    if n_train is not None and n_vote is None and "n_vote" not in options:
        options["n_vote"] = str(2 * n_train)  # TTRL's ratio: vote on twice what it trains
    settings = flags.settings("ttrl", options, model=f"hf:{model}")
    benchmark = build_benchmark(settings)
    ttrl = TTRLSettings.from_options(options).for_benchmark(benchmark.name, set(options))
    if ttrl.selector is None:
        ttrl = ttrl.model_copy(update={"selector": "execution" if benchmark.domain == "code" else "majority"})
    problems, _ = load_problems(benchmark, settings.limit)  # references stay here, unread
    benchmark.close()
    source = f"testtime/{benchmark.name}"
    train, val = write_parquet(verl_rows(problems, benchmark.prompt, source), out.resolve() / "data")
    extra = dict(pair.split("=", 1) for pair in (set_ or []) if "=" in pair)
    overrides = ttrl_overrides(
        ttrl,
        model_path=model,
        train_file=train,
        val_file=val,
        output_dir=out.resolve() / "checkpoints",
        settings_file=write_settings(ttrl, out.resolve() / "ttrl_settings.json"),
        record_dir=out.resolve(),
        preset=preset,
        extra=extra,
        nnodes=nnodes,
        gpus_per_node=gpus_per_node,
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
        f"note: verl trains rollout.n = {ttrl.n_train} responses per prompt; the vote also sees "
        f"{ttrl.n_vote - ttrl.n_train} more per prompt, sampled at the group barrier to vote only "
        f"({ttrl.n_vote} voted, {ttrl.n_train} trained, as TTRL's fork)"
    )
    shape = f"{config_nodes(overrides)} node(s) × {config_gpus(overrides)} GPU(s)"
    submit = out / "submit.sh"
    submit.write_text(submit_script(overrides, ray_address))
    submit.chmod(0o755)
    (out / "NOTES.txt").write_text(
        f"{caveat}\ncluster: {shape}; launch.sh starts Ray here (one node), submit.sh sends the job to a running "
        "cluster (ray job submit); every node needs testtime[verl], and the data, ttrl_settings.json and "
        "checkpoints must lie on a filesystem all nodes mount at the same path\n"
    )
    evaluate = write_evaluation_script(out.resolve(), settings)
    typer.echo(
        f"{len(problems)} problems → {train}\nverl accepted the configuration for {shape}; launch with: {script} "
        f"(this node) or {submit} (a running Ray cluster)\n{caveat}\n"
        f"then evaluate as TTRL does (avg@16 at T=0.6, top-p 0.95, 3,072 tokens): {evaluate} [STEP]\n"
        f"  (testtime run {shlex.join(evaluation_args(settings, out.resolve()))} --method-opt verl_weights=<merged "
        "folder> --method-opt verl_step=<step> --out <folder>)"
    )
    if launch:
        raise typer.Exit(subprocess.call(command))


def config_nodes(overrides: list[str]) -> str:
    return _override(overrides, "trainer.nnodes")


def config_gpus(overrides: list[str]) -> str:
    return _override(overrides, "trainer.n_gpus_per_node")


def _override(overrides: list[str], key: str) -> str:
    """The last value `overrides` sets for `key` (later ones win, as in Hydra)."""
    return [o.split("=", 1)[1] for o in overrides if o.startswith(f"{key}=")][-1]


def evaluation_args(settings: RunSettings, out: Path) -> list[str]:
    """TTRL's evaluation protocol (ttrl.md §10: 16 samples per problem, T=0.6, top-p 0.95, 3,072 new tokens;
    avg@16 is the summary's `pass@1`, maj@16 beside it) on the training problems, as `run --method ttrl` whose
    training is the one verl recorded in `out` (`verl_run`): the base model evaluated before, the merged
    weights of step `$step` after, the recorded steps and compute joined. `testtime run`'s arguments but the
    output folder."""
    args = ["--method", "ttrl", "--model", settings.model, "--seed", str(settings.seed), "--bench", settings.bench]
    for key, value in {**settings.method_options, "verl_run": str(out)}.items():
        args += ["--method-opt", f"{key}={value}"]
    for key, value in settings.bench_options.items():
        args += ["--bench-opt", f"{key}={value}"]
    args += ["--data-dir", settings.data_dir] if settings.data_dir else []
    args += ["--limit", str(settings.limit)] if settings.limit else []
    return args


def write_evaluation_script(out: Path, settings: RunSettings) -> Path:
    """`evaluate.sh [STEP]`: merge a step's FSDP checkpoint (default: the latest) into a HF folder with verl's
    merger, then evaluate it with TTRL's protocol in a run that joins the recorded training."""
    checkpoints = out / "checkpoints"
    merged, run = out / "merged" / "global_step_$step", out / "eval" / "global_step_$step"
    python = shlex.quote(sys.executable)
    joined = ["--method-opt", f"verl_weights={merged}", "--method-opt", "verl_step=$step"]
    body = [
        "#!/bin/sh",
        "# TTRL's evaluation: avg@16 (summary pass@1) and maj@16 at T=0.6, top-p 0.95, 3,072 tokens (ttrl.md §10),",
        "# before and after training, in a run that joins verl's recorded steps, rollouts and compute.",
        "set -e",
        f'step="${{1:-$(cat "{checkpoints}/latest_checkpointed_iteration.txt")}}"',
        f'{python} -m verl.model_merger merge --backend fsdp --local_dir "{checkpoints}/global_step_$step/actor" '
        f'--target_dir "{merged}"',
        f"{python} -m testtime.cli run {shlex.join(evaluation_args(settings, out))} "
        + " ".join(f'"{a}"' for a in joined)
        + f' --out "{run}"',
    ]
    script = out / "evaluate.sh"
    script.write_text("\n".join(body) + "\n")
    script.chmod(0o755)
    return script


@ttrl_app.command("compare")
@run_settings(exclude=("n", "temperature", "top_p", "max_tokens", *ADAPTIVE), defaults={"concurrency": 64})
def compare_command(
    out: Annotated[Path, Opt(help="folder for one sub-run per reward (resumable: run again to continue)")] = Path(
        "runs/ttrl-compare"
    ),
    rewards: Annotated[
        str, Opt(help="comma-separated rewards (testtime list shows them); majority is required")
    ] = "majority,novelty,random,format,oracle",
    preset: Annotated[str, Opt(help="ttrl preset: cpu (the miniature) | paper")] = "cpu",
    steps: Annotated[int | None, Opt(help="rollout steps (default: the preset's)")] = None,
    method_opt: Annotated[list[str] | None, Opt("--method-opt", help="TTRL setting KEY=VALUE, for every run")] = None,
    *,
    flags: SharedFlags,
) -> None:
    """Train TTRL with each reward at identical settings: each gain, TTRL − it, it − the controls, its share of
    the oracle's gain, and its health.

    Rewards: majority (TTRL), novelty (majority + diversity), self_certainty and entropy (the policy's confidence
    in its own tokens: Intuitor, RENT), random and format (signal-free controls), oracle (the true labels:
    TTRL's "RL (leakage)" upper bound, marked as using labels everywhere). Defaults reproduce the CPU miniature
    (arith, 32 problems, embedded model, --preset cpu) per reward.
    """
    _compare(out, rewards, preset, steps, method_opt, flags)


@ttrl_app.command("controls")
@run_settings(exclude=("n", "temperature", "top_p", "max_tokens", *ADAPTIVE), defaults={"concurrency": 64})
def controls_command(
    out: Annotated[Path, Opt(help="folder for one sub-run per reward (resumable: run again to continue)")] = Path(
        "runs/ttrl-controls"
    ),
    rewards: Annotated[str, Opt(help="comma-separated: majority (TTRL) and controls random, format")] = (
        "majority,random,format"
    ),
    preset: Annotated[str, Opt(help="ttrl preset: cpu (the miniature) | paper")] = "cpu",
    steps: Annotated[int | None, Opt(help="rollout steps (default: the preset's)")] = None,
    method_opt: Annotated[list[str] | None, Opt("--method-opt", help="TTRL setting KEY=VALUE, for every run")] = None,
    *,
    flags: SharedFlags,
) -> None:
    """`ttrl compare` with the controls alone (majority, random, format); kept for scripts that call it."""
    _compare(out, rewards, preset, steps, method_opt, flags)


def _compare(
    out: Path, rewards: str, preset: str, steps: int | None, method_opt: list[str] | None, flags: SharedFlags
) -> None:
    from testtime.cli.display import RunProgress, console
    from testtime.core.options import parse_options
    from testtime.experiments.ttrl_compare import compare, report_lines, run_rewards
    from testtime.experiments.ttrl_miniature import miniature_settings

    options = parse_options(method_opt or [], "--method-opt")
    if "reward" in options:
        raise UserError("compare sets the reward itself: choose them with --rewards")
    options["preset"] = preset
    if steps is not None:
        options["steps"] = str(steps)
    bench_options = flags.bench_options()
    if flags.bench == "arith" and not bench_options:
        bench_options = miniature_settings().bench_options  # the miniature's problems, which the preset never saw
    base = flags.settings("ttrl", options, bench_options=bench_options)
    chosen = [r.strip() for r in rewards.split(",") if r.strip()]
    run_rewards(base, out, chosen, observe=lambda: RunProgress(flags.progress), log=console.print)
    typer.echo("\n".join(report_lines(compare(out, chosen, flags.seed))))


@ttrl_app.command("miniature")
def miniature_command(
    out: Annotated[Path, Opt(help="the run directory (resumable: run again to continue)")] = Path(
        "runs/ttrl-miniature"
    ),
    size: Annotated[int, Opt(help="problems (two-digit additions)")] = 32,
    steps: Annotated[int | None, Opt(help="rollout steps (default: the cpu preset's)")] = None,
    seed: Annotated[int, Opt(help="the run's seed (sampling and training); the problems stay the same")] = 0,
    quiet: Annotated[bool, Opt(help="no progress display")] = False,
) -> None:
    """The TTRL miniature: the embedded model on 32 two-digit additions the cpu preset was not tuned on, no
    labels, ~10 minutes on 2 cores; prints pass@1 before and after with the paired gain, greedy before and after,
    the trained model against the base's greedy answer, and writes ttrl_curve.png."""
    from testtime.cli.display import RunProgress
    from testtime.experiments.ttrl_miniature import report_lines, run_miniature

    summary = run_miniature(out, size, steps, RunProgress(not quiet), seed)
    typer.echo("\n".join(report_lines(summary)))
    typer.echo(f"curve: {out / 'ttrl_curve.png'}")
