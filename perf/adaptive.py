"""Adaptive compute, tokens against accuracy: fixed N in {1, 2, 4, 8, 16}, each early-stopping rule at two
thresholds, and the confidence-weighted vote, on one set of problems.

One real fixed run draws N samples per problem with their token statistics (`--logprobs`), and one real adaptive
run with the default rule draws its own. Every other row is read off the fixed run's samples: an adaptive vote's
samples are the fixed vote's first ones, seed for seed (`testtime/core/adaptive.py`), so walking a rule's waves
over them is exactly what that run would draw. The script checks this on the real adaptive run (same samples,
same stop, same prediction per problem) and exits 1 if it does not hold.

    .venv/bin/python perf/adaptive.py                      # the embedded model, arith, 32 problems, N 16, T 1.0
    .venv/bin/python perf/adaptive.py --model FOLDER --smoke   # any hf model folder, 4 problems, N 4
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import testtime
from testtime.core.adaptive import Adaptive
from testtime.core.answers.vote import cluster_answers
from testtime.core.ledger import read_entries
from testtime.core.records import Problem
from testtime.core.results import ResultRecord
from testtime.evaluation.metrics import mean_ci, paired_difference_ci
from testtime.run.directory import RunDir
from testtime.selectors import SelectionContext, build_selector

RULES = [
    Adaptive(rule="exact"),
    Adaptive(rule="posterior", threshold=0.95),
    Adaptive(rule="posterior", threshold=0.99),
    Adaptive(rule="window", threshold=3),
    Adaptive(rule="window", threshold=4),
]


def correct_of(record: ResultRecord, chosen: int | None) -> float:
    """Whether the vote's pick (a sample's place) was right: the sample's own grade (equivalent answers share it)."""
    return float(chosen is not None and record.sample_correct[chosen])


def pick(record: ResultRecord, k: int, **selector: object) -> int | None:
    """The majority selector's pick among the first k samples (its place, or None: every one abstained)."""
    problem = Problem(id=record.problem_id, domain="math", statement="")
    chosen = asyncio.run(
        build_selector("majority", selector).select(problem, record.candidates[:k], SelectionContext())
    )
    return next((i for i, c in enumerate(record.candidates) if c.index == chosen.index), None)


def stop_of(rule: Adaptive, record: ResultRecord, cap: int) -> int:
    """The samples `rule` would draw for this problem: its waves walked over the fixed run's samples."""
    answers = [c.answer for c in record.candidates]
    for drawn in rule.schedule(cap):
        if rule.verdict(cluster_answers(answers[:drawn]), drawn, cap) is not None:
            return drawn
    return cap


def row(name: str, records: Sequence[ResultRecord], drawn: Sequence[int], picks: Sequence[int | None],
        tokens: dict[str, list[int]], base: tuple[list[float], float]) -> list[str]:  # fmt: skip
    correct = [correct_of(r, p) for r, p in zip(records, picks, strict=True)]
    spent = sum(sum(tokens[r.problem_id][:k]) for r, k in zip(records, drawn, strict=True)) / len(records)
    accuracy, versus = mean_ci(correct), paired_difference_ci(correct, base[0])
    assert accuracy is not None and versus is not None
    return [
        name,
        f"{sum(drawn) / len(drawn):.1f}",
        f"{spent:,.0f}",
        f"{spent / base[1]:.2f}",
        f"{accuracy.mean:.3f} [{accuracy.ci_low:.3f}, {accuracy.ci_high:.3f}]",
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
    parser.add_argument("--smoke", action="store_true", help="4 problems, N 4")
    args = parser.parse_args()
    if args.smoke:
        args.problems, args.n = 4, 4
    model = f"hf:{args.model}" if Path(args.model).is_dir() else args.model
    common = {"bench": args.bench, "model": model, "limit": args.problems, "n": args.n, "logprobs": 0,
              "temperature": args.temperature, "max_tokens": args.max_tokens, "concurrency": 64}  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        fixed_dir, adaptive_dir = Path(folder) / "fixed", Path(folder) / "adaptive"
        testtime.run_method("majority", out=fixed_dir, **common)  # type: ignore[arg-type]
        testtime.run_method("majority", out=adaptive_dir, adaptive=True, **common)  # type: ignore[arg-type]
        records = sorted(RunDir(fixed_dir).read_results(), key=lambda r: r.problem_id)
        real = {r.problem_id: r for r in RunDir(adaptive_dir).read_results()}
        tokens: dict[str, list[int]] = defaultdict(lambda: [0] * args.n)
        for e in read_entries(fixed_dir / "ledger.jsonl"):
            if e.kind == "model_call" and e.purpose == "solve":
                tokens[e.problem_id][e.sample_index] = e.prompt_tokens + e.completion_tokens
    cap = args.n
    full = [correct_of(r, pick(r, cap)) for r in records]
    base = (full, sum(sum(tokens[r.problem_id]) for r in records) / len(records))
    default = Adaptive()
    mismatched = [
        r.problem_id
        for r in records
        if (stop := real[r.problem_id].adaptive) is None
        or stop.drawn != stop_of(default, r, cap)
        or [c.text for c in real[r.problem_id].candidates] != [c.text for c in r.candidates[: stop.drawn]]
        or real[r.problem_id].prediction != (r.candidates[p].answer if (p := pick(r, stop.drawn)) is not None else None)
    ]
    table = [["votes", "samples/problem", "tokens/problem", "tokens vs N", "accuracy [95% CI]", f"vs N={cap} (paired)"]]
    for k in sorted({1, 2, 4, 8, cap} & set(range(1, cap + 1))):
        table.append(row(f"fixed N={k}", records, [k] * len(records), [pick(r, k) for r in records], tokens, base))
    for rule in RULES:
        name = f"adaptive {rule.rule}" + (f" {rule.limit:g}" if rule.limit is not None else "")
        name += " (default)" if (rule.rule, rule.limit) == (default.rule, default.limit) else ""
        drawn = [stop_of(rule, r, cap) for r in records]
        table.append(row(name, records, drawn, [pick(r, k) for r, k in zip(records, drawn, strict=True)], tokens, base))
    if all(c.token_stats for r in records for c in r.candidates if c.answer is not None):
        for keep in (1.0, 0.9):
            weighed = [pick(r, cap, weight="confidence", keep=keep) for r in records]
            table.append(row(f"weighted N={cap}, keep {keep:g}", records, [cap] * len(records), weighed, tokens, base))
    else:
        print("no token statistics from this model: the weighted vote's rows are left out", file=sys.stderr)
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    print(f"{args.bench}, {len(records)} problems, {model}, T={args.temperature}, max tokens {args.max_tokens}")
    for line in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)))
    if mismatched:
        print(f"the real adaptive run differs from its reading off the fixed run on {mismatched}", file=sys.stderr)
        sys.exit(1)
    print(f"the real adaptive run (default rule) matches its reading off the fixed run on all {len(records)} problems")


if __name__ == "__main__":
    main()
