"""Answer equivalence: throughput and correctness of `core.answers.equivalent` against math-verify.

Every gold answer in the data folder is paired with itself, with rewrites that must be equivalent
(leading zeros, `.0`, `\\text{}`, `x =`, thousands separators, `\\dfrac`, decimals, spacing, `$…$`) and
with rewrites that must not be (off by one, swapped fraction, `+1`). Truth is known by construction, so
each grader's mistakes are listed. Both graders start cold (caches cleared) and see the same pairs. A hold-out
of hand-written pairs (`HOLD_OUT`: identities, matrices, equations, ±, sets, bases, intervals), which the
fast path was not tuned on, is graded apart and its mistakes listed the same way.

    .venv/bin/python perf/grading.py [--data-dir ../shared/data] [--show 12]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import re
import time
from fractions import Fraction
from pathlib import Path

from testtime.core.answers import equivalence
from testtime.core.jsonl import read_records

BENCHES = ("aime24", "aime25", "amc23", "math500")
# (a, b, equivalent?) written by hand, true by mathematics, apart from the rewrites above.
HOLD_OUT: list[tuple[str, str, bool]] = [
    ("\\sin^2x+\\cos^2x", "1", True),
    ("\\cot x", "\\frac{\\cos x}{\\sin x}", True),
    ("\\tan x", "\\frac{\\sin x}{\\cos x}", True),
    ("\\sin\\frac{\\pi}{6}", "\\frac{1}{2}", True),
    ("\\ln 4", "2\\ln 2", True),
    ("\\sqrt{8}", "2\\sqrt{2}", True),
    ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}", True),
    ("\\begin{pmatrix} 2 \\\\ 4 \\end{pmatrix}", "2\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", True),
    ("\\begin{pmatrix} \\frac{1}{2} \\\\ -3 \\end{pmatrix}", "\\begin{pmatrix} 0.5 \\\\ -3 \\end{pmatrix}", True),
    ("x+y=1", "2x+2y=2", True),
    ("3\\pm\\sqrt{2}", "3+\\sqrt{2}, 3-\\sqrt{2}", True),
    ("\\pm 2", "2, -2", True),
    ("x\\in[1,5)", "[1,5)", True),
    ("101_2", "101_{2}", True),
    ("\\{3, 1, 2\\}", "\\{1, 2, 3\\}", True),
    ("\\sin x", "\\cos x", False),
    ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\begin{pmatrix} 2 \\\\ 1 \\end{pmatrix}", False),
    ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\begin{pmatrix} 1 & 2 \\end{pmatrix}", False),
    ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "3", False),
    ("x+y=1", "x+y=2", False),
    ("3\\pm\\sqrt{2}", "3+\\sqrt{2}", False),
    ("101_2", "101_3", False),
    ("x\\in[1,5)", "[1,5]", False),
    ("\\{1, 2\\}", "\\{1, 2, 3\\}", False),
    ("\\ln 4", "\\ln 5", False),
    ("\\sin\\frac{\\pi}{6}", "\\frac{\\sqrt{3}}{2}", False),
]


def rewrites(gold: str) -> list[tuple[str, bool]]:
    """(rewrite, should_be_equivalent) pairs for one gold answer."""
    pairs = [
        (gold, True),
        (f" {gold} ", True),
        (f"${gold}$", True),
        (f"\\displaystyle {gold}", True),
        (f"{gold}+1", False),
    ]
    if re.fullmatch(r"-?\d+", gold):
        n = int(gold)
        pairs += [(f"{n}.0", True), (f"\\text{{{n}}}", True), (f"x = {n}", True), (str(n + 1), False)]
        if n != 0:
            pairs.append((f"{n}0", False))
        if 0 <= n < 100:
            pairs.append((f"0{n}", True))
        if abs(n) >= 1000:
            pairs.append((f"{n:,}", True))
    if (m := re.fullmatch(r"\\frac\{(-?\d+)\}\{(\d+)\}", gold)) is not None:
        a, b = int(m.group(1)), int(m.group(2))
        pairs += [(f"\\dfrac{{{a}}}{{{b}}}", True), (f"{a}/{b}", True), (f"\\frac{{{b}}}{{{a}}}", a == b)]
        value = Fraction(a, b)
        if value.denominator in (1, 2, 4, 5, 8, 10, 20, 25, 50, 100):
            pairs.append((str(float(value)), True))
    return pairs


def load_pairs(data_dir: Path) -> list[tuple[str, str, bool]]:
    pairs = []
    for bench in BENCHES:
        for line in read_records(data_dir / f"{bench}.jsonl"):
            gold = json.loads(line)["answer"]
            pairs += [(gold, other, truth) for other, truth in rewrites(gold)]
    return pairs


def ours(pairs: list[tuple[str, str, bool]]) -> tuple[list[bool], float]:
    equivalence.answer_key.cache_clear()
    equivalence._symbolic_equal.cache_clear()
    equivalence._WORKER.check("1", "1")  # process start-up is not per-pair work
    equivalence._WORKER.checks = 0
    started = time.perf_counter()
    verdicts = [equivalence.equivalent(gold, other) for gold, other, _ in pairs]
    return verdicts, time.perf_counter() - started


def math_verify(pairs: list[tuple[str, str, bool]]) -> tuple[list[bool], float]:
    from math_verify import parse, verify

    parse("$1$")  # import-time and first-call costs are not per-pair work
    started = time.perf_counter()
    verdicts = [bool(verify(parse(f"${gold}$"), parse(f"${other}$"))) for gold, other, _ in pairs]
    return verdicts, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--show", type=int, default=12)
    parser.add_argument("--smoke", action="store_true", help="a tiny size, to prove the script still runs (CI)")
    parser.add_argument("--profile", type=int, default=0, help="print the N costliest functions of testtime's pass")
    args = parser.parse_args()
    pairs = load_pairs(args.data_dir)[: 60 if args.smoke else None]
    truth = [t for _, _, t in pairs]
    if args.profile:
        ours(pairs)  # the worker's start-up and first check are no pair's cost (the timed pass warms them too)
        profiled = cProfile.Profile()
        profiled.runcall(ours, pairs)
        pstats.Stats(profiled).sort_stats("tottime").print_stats(args.profile)
    our_verdicts, our_s = ours(pairs)
    mv_verdicts, mv_s = math_verify(pairs)
    print(f"{len(pairs)} pairs from {len({g for g, _, _ in pairs})} distinct gold answers in {args.data_dir}")
    print(f"{'grader':14} {'seconds':>8} {'pairs/s':>9} {'correct':>8} {'wrong':>6}")
    for name, verdicts, seconds in (("testtime", our_verdicts, our_s), ("math-verify", mv_verdicts, mv_s)):
        wrong = sum(v != t for v, t in zip(verdicts, truth, strict=True))
        print(f"{name:14} {seconds:8.2f} {len(pairs) / seconds:9.0f} {len(pairs) - wrong:8} {wrong:6}")
    print(f"speed-up: {mv_s / our_s:.1f}x (symbolic checks: {equivalence._WORKER.checks})")
    held_ours, _ = ours(HOLD_OUT)
    held_mv, _ = math_verify(HOLD_OUT)
    print(f"\nhold-out, {len(HOLD_OUT)} hand-written pairs: mistakes testtime", end=" ")
    print(f"{sum(v != t for v, (_, _, t) in zip(held_ours, HOLD_OUT, strict=True))}, math-verify", end=" ")
    print(sum(v != t for v, (_, _, t) in zip(held_mv, HOLD_OUT, strict=True)))
    for (a, b, should), o, m in zip(HOLD_OUT, held_ours, held_mv, strict=True):
        if should in (o, m) and o == m:
            continue
        print(f"  {a!r:40} vs {b!r:40} should be {'equal' if should else 'different'}: testtime {o}, math-verify {m}")
    mv_right_we_wrong = [p for p, o, m in zip(pairs, our_verdicts, mv_verdicts, strict=True) if m == p[2] != o]
    mv_wrong_we_right = [p for p, o, m in zip(pairs, our_verdicts, mv_verdicts, strict=True) if o == p[2] != m]
    both_wrong = [p for p, o, m in zip(pairs, our_verdicts, mv_verdicts, strict=True) if o != p[2] and m != p[2]]
    for title, rows in (
        ("math-verify right, testtime wrong", mv_right_we_wrong),
        ("math-verify wrong, testtime right", mv_wrong_we_right),
        ("both wrong", both_wrong),
    ):
        print(f"\n{title}: {len(rows)}")
        for gold, other, should in rows[: args.show]:
            print(f"  gold {gold!r:40} vs {other!r:40} should be {'equal' if should else 'different'}")


if __name__ == "__main__":
    main()
