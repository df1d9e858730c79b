"""Adaptive compute, tokens and wall time against accuracy: fixed N in {1, 2, 4, 8, 16}, each early-stopping rule
(ours and the papers' own procedures, `ac` and `esc`), and the confidence-weighted vote, on one set of problems.

One real fixed run draws N samples per problem with their token statistics (`--logprobs`); every table row is read
off its samples: an adaptive vote's samples are the fixed vote's first ones, seed for seed
(`testtime/core/adaptive.py`), so walking a rule's waves over them is exactly what that run would draw. Then a
fixed run and an adaptive run (the default rule) back to back, as a user runs them (no --logprobs, the default
concurrency), for wall time and the forward passes each took (the summary's `forward_passes`); the script checks
that the real adaptive run drew what its reading off that fixed run says (same samples, same stop, same prediction
per problem) and exits 1 if it does not hold.

    .venv/bin/python perf/adaptive.py                      # the embedded model, arith, 32 problems, N 16, T 1.0
    .venv/bin/python perf/adaptive.py --bench-opt seed=2   # another 32 problems, that nobody tuned on
    .venv/bin/python perf/adaptive.py --model FOLDER --smoke   # any hf model folder, 4 problems, N 4
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import testtime
from testtime.core.adaptive import Adaptive
from testtime.evaluation.metrics import paired_difference_ci
from testtime.evaluation.summary import RunSummary
from testtime.experiments.adaptive_sweep import FixedVotes
from testtime.experiments.curves import Point
from testtime.run.directory import RunDir
from testtime.selectors import Selector, build_selector

RULES = [
    Adaptive(rule="exact"),
    Adaptive(rule="posterior", threshold=0.8),
    Adaptive(rule="posterior", threshold=0.95),
    Adaptive(rule="window", threshold=3),
    Adaptive(rule="window", threshold=4),
    Adaptive(rule="ac"),  # Adaptive-Consistency as published: 0.95, after every sample, by text
    Adaptive(rule="esc"),  # Early-Stopping Self-Consistency as published: disjoint windows of 5
]


def row(votes: FixedVotes, name: str, drawn: list[int], base: Point, selector: Selector | None = None) -> list[str]:
    """One line of the table: the votes over each problem's first `drawn` samples, against the fixed run at N."""
    correct = votes.correct(drawn, selector)
    accuracy = votes.point(name, drawn, selector)
    versus = paired_difference_ci(correct, votes.correct([votes.cap] * len(drawn)))
    assert versus is not None
    return [
        name,
        f"{accuracy.rollouts:.1f}",
        f"{accuracy.tokens:,.0f}",
        f"{accuracy.tokens / base.tokens:.2f}",
        f"{accuracy.accuracy:.3f} [{accuracy.ci_low:.3f}, {accuracy.ci_high:.3f}]",
        f"{versus.mean:+.3f} [{versus.ci_low:+.3f}, {versus.ci_high:+.3f}]",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="hf:smollm2-135m", help="a model spec, or an hf model folder")
    parser.add_argument("--bench", default="arith")
    parser.add_argument("--problems", type=int, default=32)
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--bench-opt", action="append", default=[], help="benchmark option KEY=VALUE (arith seed=1)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the two runs in this folder (default: none)")
    parser.add_argument("--smoke", action="store_true", help="4 problems, N 4")
    args = parser.parse_args()
    if args.smoke:
        args.problems, args.n = 4, 4
    model = f"hf:{args.model}" if Path(args.model).is_dir() else args.model
    bench_options = dict(option.split("=", 1) for option in args.bench_opt)
    common = {"bench": args.bench, "model": model, "limit": args.problems, "n": args.n,
              "temperature": args.temperature, "max_tokens": args.max_tokens,
              "bench_options": bench_options}  # fmt: skip
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.keep or Path(scratch)
        testtime.run_method("majority", out=folder / "table", logprobs=0, concurrency=64, **common)  # type: ignore[arg-type]
        votes = FixedVotes.read(folder / "table")
        timed = {}
        for name, adaptive in (("fixed", False), ("adaptive", True)):  # back to back, as a user runs them
            timed[name] = testtime.run_method("majority", out=folder / name, adaptive=adaptive, **common).summary  # type: ignore[arg-type]
        paired = FixedVotes.read(folder / "fixed")
        real = {r.problem_id: r for r in RunDir(folder / "adaptive").read_results()}
    default = Adaptive()
    mismatched = []
    for r in paired.records:
        stop, answered = real[r.problem_id].adaptive, real[r.problem_id]
        chosen = paired.pick(r, stop.drawn) if stop is not None else None
        if (
            stop is None
            or stop.drawn != paired.stop(default, r)
            or [c.text for c in answered.candidates] != [c.text for c in r.candidates[: stop.drawn]]
            or answered.prediction != (r.candidates[chosen].answer if chosen is not None else None)
        ):
            mismatched.append(r.problem_id)
    cap, records = votes.cap, votes.records
    base = votes.point(f"fixed N={cap}", [cap] * len(records))
    table = [["votes", "samples/problem", "tokens/problem", "tokens vs N", "accuracy [95% CI]", f"vs N={cap} (paired)"]]
    for k in sorted({1, 2, 4, 8, cap} & set(range(1, cap + 1))):
        table.append(row(votes, f"fixed N={k}", [k] * len(records), base))
    for rule in RULES:
        name = f"adaptive {rule.rule}" + (f" {rule.limit:g}" if rule.limit is not None else "")
        name += " (default)" if (rule.rule, rule.limit) == (default.rule, default.limit) else ""
        table.append(row(votes, name, [votes.stop(rule, r) for r in records], base))
    if all(c.token_stats for r in records for c in r.candidates if c.answer is not None):
        for keep in (1.0, 0.9):
            weighed = build_selector("majority", {"weight": "confidence", "keep": keep})
            table.append(row(votes, f"weighted N={cap}, keep {keep:g}", [cap] * len(records), base, weighed))
    else:
        print("no token statistics from this model: the weighted vote's rows are left out", file=sys.stderr)
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    options = "".join(f" {k}={v}" for k, v in bench_options.items())
    sampled = f"T={args.temperature}, max tokens {args.max_tokens}"
    print(f"{args.bench}{options}, {len(records)} problems, {model}, {sampled}")
    for line in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)))
    print()
    print(timing(timed["fixed"], timed["adaptive"]))
    if mismatched:
        print(f"the real adaptive run differs from its reading off the fixed run on {mismatched}", file=sys.stderr)
        sys.exit(1)
    print(f"the real adaptive run (default rule) matches its reading off the fixed run on all {len(records)} problems")


def timing(fixed: RunSummary, adaptive: RunSummary) -> str:
    """The back-to-back pair: wall time, tokens, accuracy and forward passes, adaptive against fixed."""
    lines = ["run       wall s   tokens    accuracy   batches  rows/batch"]
    for name, summary in (("fixed", fixed), ("adaptive", adaptive)):
        passes = summary.forward_passes
        batches = f"{passes.batches:7d}  {passes.rows_per_batch or 0:10.1f}" if passes else "      -           -"
        accuracy = summary.accuracy.mean if summary.accuracy else float("nan")
        lines.append(f"{name:8s}  {summary.wall_s or 0:6.1f}  {summary.ledger.tokens:7,d}  {accuracy:9.3f}  {batches}")
    wall = (adaptive.wall_s or 0) / (fixed.wall_s or 1)
    tokens = adaptive.ledger.tokens / max(fixed.ledger.tokens, 1)
    lines.append(f"adaptive / fixed: wall time {wall:.2f}, tokens {tokens:.2f}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
