"""Streams, measured: prequential accuracy (each arrival answered before anything is learned from it).

Part `memory` (the mechanics, seconds): TRT with one round on an arith stream against a scripted server
(`mock_server.carry_lesson_reply`: sums are right only when the prompt carries the lesson its reflections
distil), per-problem memory vs memory shared across the stream. Part `ttrl` (the embedded model, ~15 min on
2 cores): the same arith stream answered with no adaptation (`majority` of 8 at the cpu preset's evaluation
sampling, T=1.0), with
online TTRL (`--preset cpu`, an update of 2 rollout steps on the last 8 arrivals every 4), and offline TTRL
trained on the whole set first at the same rollout steps (16), then evaluated (transductive: it saw every
problem before answering any). Runs go under `--out` (else a temporary folder, removed after) and are resumed
when present, so a table is re-printed from finished runs without a model call.

    .venv/bin/python perf/stream.py [--part memory|ttrl|all] [--out DIR] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from testtime.evaluation.metrics import paired_difference_ci
from testtime.experiments.ttrl_miniature import REPORT_SET_SEED
from testtime.methods.ttrl.recipe import PRESETS
from testtime.models.mock_server import MockChatServer, carry_lesson_reply


def run(out: Path, *args: str) -> dict[str, Any]:
    """A `testtime run` (resumed when its directory holds one); its summary."""
    given = ["--resume", str(out)] if (out / "config.json").is_file() else [*args, "--out", str(out)]
    done = subprocess.run(
        [sys.executable, "-m", "testtime.cli", "run", *given, "--quiet"], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"{out}: {done.stderr[-2000:]}")
    return json.loads((out / "summary.json").read_text())


def interval(value: dict[str, Any] | None) -> str:
    return "-" if value is None else f"{value['mean']:.3f} [{value['ci_low']:.3f}, {value['ci_high']:.3f}]"


def row(name: str, summary: dict[str, Any]) -> str:
    stream = summary.get("prequential")
    if stream is None:  # offline TTRL: its trained model's vote over the evaluation samples, after training
        majority = summary["maj@k"] or {}
        top = max(majority, key=int) if majority else None
        windows, accuracy = "(after training on all)", f"maj@{top} {majority[top]:.3f}" if top else "-"
    else:
        windows = " / ".join(
            "-" if w["accuracy"] is None else f"{w['accuracy']['mean']:.2f}" for w in stream["windows"]
        )
        accuracy = interval(stream["accuracy"])
    ledger = summary["ledger"]
    return f"| {name} | {accuracy} | {windows} | {ledger['tokens']:,} | {ledger['train_steps']} |"


def paired(run: Path, baseline: Path) -> str:
    """The run's accuracy minus the baseline's, paired by problem (the same arrivals, the same order)."""
    correct = [
        {r["problem_id"]: float(bool(r["correct"])) for r in map(json.loads, (p / "results.jsonl").open())}
        for p in (run, baseline)
    ]
    d = paired_difference_ci([correct[0][k] for k in correct[1]], list(correct[1].values()))
    return "-" if d is None else f"{d.mean:+.3f} [{d.ci_low:+.3f}, {d.ci_high:+.3f}]"


def memory_part(out: Path, arrivals: int) -> list[str]:
    rows = []
    with MockChatServer(reply=carry_lesson_reply) as server:
        for memory in ("problem", "shared"):
            summary = run(
                out / f"trt-{memory}",
                *("--method", "trt", "-T", "1", "-K", "2", "--method-opt", f"memory={memory}", "--stream"),
                *("--bench", "arith", "--limit", str(arrivals), "--model", "openai:scripted", "--api-base", server.url),
            )
            rows.append(row(f"trt memory={memory} (scripted server)", summary))
    return rows


def ttrl_part(out: Path, arrivals: int, smoke: bool, model: Path | None) -> list[str]:
    online = ["--method-opt", "update_every=2", "--method-opt", "update_steps=1"] if smoke else []
    steps = "1" if smoke else "16"  # online: arrivals / update_every updates × update_steps rollout steps
    held_out = ("--bench-opt", f"seed={REPORT_SET_SEED}")  # problems the cpu preset was not tuned on
    stream = ("--stream", "--bench", "arith", "--limit", str(arrivals), *held_out)
    stream += ("--model", f"hf:{model}") if model else ()
    cpu = PRESETS["cpu"]  # the baseline samples as online TTRL answers: the preset's evaluation sampling
    sampling = ("--n", str(cpu["eval_samples"]), "--temperature", str(cpu["eval_temperature"]),
                "--top-p", str(cpu["eval_top_p"]), "--max-tokens", str(cpu["max_response"]))  # fmt: skip
    none = run(out / "none", "--method", "majority", *sampling, *stream)
    learned = run(out / "online", "--method", "ttrl", "--preset", "cpu", *stream, *online)
    small = ("--method-opt", "prompts_per_step=2") if smoke else ()  # the smoke stream has 2 problems
    offline = run(out / "offline", "--method", "ttrl", "--preset", "cpu", "--steps", steps, *small, *stream[1:])
    ttrl = offline["ttrl"]
    return [
        row("no adaptation (majority of 8)", none),
        row("online TTRL", learned),
        row("offline TTRL", offline),
        "",
        f"online TTRL − no adaptation, paired by problem: {paired(out / 'online', out / 'none')}",
        f"offline TTRL: maj@8 before {ttrl['maj@k_before'].get('8', float('nan')):.3f}, greedy "
        f"{ttrl['greedy_before']:.3f} → {ttrl['greedy_after']:.3f}, pass@1 {interval(ttrl['pass@1_before'])} → "
        f"{interval(ttrl['pass@1_after'])}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("memory", "ttrl", "all"), default="all")
    parser.add_argument("--out", type=Path, default=None, help="where the runs go (default: a temporary folder)")
    parser.add_argument("--smoke", action="store_true", help="a tiny size, to prove the script still runs (CI)")
    parser.add_argument(
        "--model",
        type=Path,
        default=None,
        help="a transformers folder for the ttrl part in place of the embedded model (CI: a tiny one)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stream-") as scratch:  # runs hold weights: kept only under --out
        out = args.out or Path(scratch)
        rows = []
        if args.part in ("memory", "all"):
            rows += memory_part(out, 4 if args.smoke else 32)
        if args.part in ("ttrl", "all"):
            rows += ttrl_part(out, 2 if args.smoke else 32, args.smoke, args.model)
    print("| run | prequential accuracy [95% CI] | by quarter of the stream | tokens | train steps |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))
    if args.out:
        print(f"runs: {args.out}")


if __name__ == "__main__":
    main()
