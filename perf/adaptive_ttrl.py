"""TTRL's training vote with and without --adaptive: the vote-only samples a settled prompt no longer draws, and
what the trained model answers after, on the TTRL miniature (the held-out arith set, the cpu preset: N_vote 16,
N_train 8).

Both runs start from the same weights and seed; with --adaptive (the default rule) a prompt whose 8 trained
samples already settle its vote of 16 draws none of its 8 vote-only samples (they are drawn in a second batch, for
the unsettled prompts only). The table gives the vote-only samples and their tokens (the ledger's `ttrl_vote`
lines), all rollout tokens (`ttrl_rollout` and `ttrl_vote`), each run's wall time, and the greedy answer after
training, with the paired difference by problem.

    .venv/bin/python perf/adaptive_ttrl.py                     # the embedded model: two miniatures, ~8 min
    .venv/bin/python perf/adaptive_ttrl.py --model FOLDER --smoke   # any hf folder: 4 problems, 1 step
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from testtime.core.ledger import read_entries
from testtime.evaluation.metrics import mean_ci, paired_difference_ci
from testtime.experiments.ttrl_miniature import miniature_settings
from testtime.run.directory import RunDir
from testtime.run.execute import execute
from testtime.run.lifecycle import create_or_resume


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="an hf model folder (default: the embedded model)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="4 problems, 1 training step")
    args = parser.parse_args()
    size, steps = (4, 1) if args.smoke else (32, None)
    base = miniature_settings(size, steps, args.seed)
    if args.model:
        base = base.model_copy(update={"model": f"hf:{args.model}" if Path(args.model).is_dir() else args.model})
    rows, correct = [], {}
    with tempfile.TemporaryDirectory() as folder:
        for name, adaptive in (("fixed vote", False), ("adaptive vote", True)):
            out = Path(folder) / name.replace(" ", "-")
            summary = execute(create_or_resume(base.model_copy(update={"adaptive": adaptive}), out))
            lines = [e for e in read_entries(out / "ledger.jsonl") if e.kind == "model_call"]
            votes = [e for e in lines if e.purpose == "ttrl_vote"]
            trained = [e for e in lines if e.purpose in ("ttrl_rollout", "ttrl_vote")]
            records = sorted(RunDir(out).read_results(), key=lambda r: r.problem_id)
            correct[name] = [float(bool(r.correct)) for r in records]
            rows.append((name, len(votes), sum(e.completion_tokens for e in votes),
                         sum(e.prompt_tokens + e.completion_tokens for e in trained), summary))  # fmt: skip
    fixed = rows[0]
    print(f"TTRL miniature ({size} held-out arith problems, cpu preset, seed {args.seed}), {base.model}")
    print(f"{'vote':15} {'vote-only samples':>18} {'their tokens':>13} {'rollout tokens':>15} {'vs fixed':>9} "
          f"{'wall s':>8} {'vs fixed':>9}  greedy after training [95% CI]   vs fixed (paired)")  # fmt: skip
    for name, samples, vote_tokens, tokens, summary in rows:
        after = mean_ci(correct[name])
        versus = paired_difference_ci(correct[name], correct["fixed vote"])
        assert after is not None and versus is not None and summary.wall_s is not None
        print(
            f"{name:15} {samples:>18,} {vote_tokens:>13,} {tokens:>15,} {tokens / max(fixed[3], 1):>9.2f} "
            f"{summary.wall_s:>8.1f} {summary.wall_s / max(fixed[4].wall_s or 0.0, 1e-9):>9.2f}  "
            f"{after.mean:.3f} [{after.ci_low:.3f}, {after.ci_high:.3f}]           "
            f"{versus.mean:+.3f} [{versus.ci_low:+.3f}, {versus.ci_high:+.3f}]"
        )
    print("rollout tokens: prompt and completion tokens of every rollout sample, trained and vote-only; wall s: each")
    print("run's own wall time (model load, evaluation before and after, training), back to back in this process")


if __name__ == "__main__":
    main()
