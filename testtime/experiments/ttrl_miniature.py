"""The TTRL miniature: the proof, on a 2-core CPU, that label-free RL on the test problems raises accuracy.

The embedded model (SmolLM2-135M-Instruct) on 32 seeded two-digit additions (`arith`, pass@1 ≈ 0.3, its maj@8
higher: the TTRL regime), `ttrl --preset cpu` (the paper's recipe at this size: 16 votes, 8 trained, 4 prompts
per rollout step, one optimiser step per prompt, 8 rollout steps, T=1.0; ≈ 10 minutes here). Reports pass@1
(avg@8 at T=1.0) before and after with a paired bootstrap CI of the gain, greedy accuracy, the base maj@k from
the same samples, and writes `ttrl_curve.png`: per step, the policy's accuracy on that step's prompts (ground-
truth ratio), the pseudo-label's accuracy (both audited from sealed labels, outside the method) and the label-
free majority ratio and entropy. Resumable: run it again on the same --out.

    python -m testtime.experiments.ttrl_miniature --out runs/ttrl-miniature

"""

from __future__ import annotations

import argparse
from pathlib import Path
from statistics import mean
from typing import Any

from testtime.core.results import read_steps
from testtime.core.rundir import RunDir
from testtime.experiments.config import RunConfig
from testtime.experiments.run import execute, start_run
from testtime.models import DEFAULT_MODEL


def miniature_config(size: int = 32, steps: int | None = None, seed: int = 0) -> RunConfig:
    return RunConfig(
        method="ttrl",
        bench="arith",
        model=DEFAULT_MODEL,
        seed=seed,
        bench_options={"digits": "2", "size": str(size)},
        method_options={"preset": "cpu", **({"steps": str(steps)} if steps else {})},
        concurrency=64,  # the local batch: 64 rows decode at 0.6× the cost per sample of 16 on 2 cores
    )


def run_miniature(out: Path, size: int = 32, steps: int | None = None, progress: bool = False) -> dict[str, Any]:
    if (out / "config.json").is_file():
        summary = execute(RunDir.open_existing(out), progress=progress)
    else:
        run, parts = start_run(miniature_config(size, steps), out)
        summary = execute(run, parts=parts, progress=progress)
    plot_curve(out, summary)
    return summary


def _rolling(values: list[float], window: int = 5) -> list[float]:
    return [mean(values[max(0, i - window + 1) : i + 1]) for i in range(len(values))]


def plot_curve(out: Path, summary: dict[str, Any]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ttrl = summary["ttrl"]
    per_step = ttrl["per_step"]
    logged = read_steps(out / "ttrl" / "steps.jsonl")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    top.plot(per_step["step"], _rolling(per_step["ground_truth_ratio"]), label="policy accuracy on the step's prompts")
    top.plot(per_step["step"], _rolling(per_step["label_correct"]), label="pseudo-label accuracy (audit)")
    for key, style, label in (("pass@1_before", ":", "pass@1 before"), ("pass@1_after", "--", "pass@1 after")):
        top.axhline(ttrl[key]["mean"], linestyle=style, color="grey", label=f"{label} ({ttrl[key]['mean']:.3f})")
    top.set_ylabel("accuracy (5-step rolling mean)")
    top.set_ylim(0, 1)
    top.legend(fontsize=8)
    steps = [r.step for r in logged]
    bottom.plot(steps, [r.majority_ratio or 0 for r in logged], label="majority ratio (label-free)")
    bottom.plot(steps, [r.entropy or 0 for r in logged], label="token entropy (label-free)")
    bottom.set_xlabel("optimiser step")
    bottom.legend(fontsize=8)
    fig.suptitle("TTRL miniature: SmolLM2-135M on two-digit additions, no labels")
    fig.tight_layout()
    path = out / "ttrl_curve.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def report_lines(summary: dict[str, Any]) -> list[str]:
    ttrl = summary["ttrl"]

    def ci(m: dict[str, float]) -> str:
        return f"{m['mean']:.3f} [{m['ci_low']:.3f}, {m['ci_high']:.3f}]"

    lines = [
        f"problems                 {summary['problems']}",
        f"pass@1 before (avg@k)    {ci(ttrl['pass@1_before'])}",
        f"pass@1 after  (avg@k)    {ci(ttrl['pass@1_after'])}",
        f"gain, paired             {ci(ttrl['pass@1_gain'])}",
    ]
    if "greedy_before" in ttrl:
        lines.append(f"greedy before → after    {ttrl['greedy_before']:.3f} → {ttrl['greedy_after']:.3f}")
    lines += [f"base maj@{k:<16}{v:.3f}" for k, v in ttrl.get("maj@k_before", {}).items()]
    same = ttrl.get("compute", {}).get("base_majority_at_same_tokens")
    if same:
        note = f" (same tokens buy maj@{ttrl['compute']['same_tokens_k']})" if same["capped"] else ""
        lines.append(f"base maj@{same['k']} at TTRL's tokens {same['accuracy']:.3f}{note}")
    ledger = summary["ledger"]
    lines.append(f"training                 {ledger['train_steps']} steps, {ledger['train_seconds']:.0f} s")
    lines.append(f"wall time                {summary['wall_s']:.0f} s")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("runs/ttrl-miniature"))
    parser.add_argument("--size", type=int, default=32, help="problems (two-digit additions)")
    parser.add_argument("--steps", type=int, default=None, help="rollout steps (default: the cpu preset's)")
    args = parser.parse_args()
    summary = run_miniature(args.out, args.size, args.steps, progress=True)
    print("\n".join(report_lines(summary)))
    print(f"curve: {args.out / 'ttrl_curve.png'}")


if __name__ == "__main__":
    main()
