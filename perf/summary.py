"""The cost of a run's summary after its last call: maj@k, intervals and the label-free quantities over an
8,000-call run, in two shapes (1,000 problems × 8 samples; 125 problems × 64 samples, where maj@k's subsets
are too many to list and are drawn). Goal: under 1 s each. maj@k shares one subset matrix per (n, k) across
problems and votes with array operations; the bootstrap resamples in one array.

    .venv/bin/python perf/summary.py [--smoke]
"""

from __future__ import annotations

import argparse
import random
import time

from testtime.core.ledger import LedgerTotals
from testtime.core.results import ResultRecord
from testtime.evaluation.scoring import summarize


def records(problems: int, n: int, classes: int, seed: int = 0) -> list[ResultRecord]:
    """Graded majority results with random answer classes (some abstains), as a run would write them."""
    rng = random.Random(seed)
    out = []
    for p in range(problems):
        cluster_of = [rng.randrange(-1, classes) for _ in range(n)]
        correct = [rng.random() < 0.3 for _ in range(classes)]
        out.append(
            ResultRecord.model_validate(
                {
                    "problem_id": f"p{p}",
                    "prediction": "1",
                    "correct": correct[0],
                    "graded_answer": "1",
                    "status": "correct" if correct[0] else "wrong",
                    "candidates": [
                        {"index": i, "text": "", "answer": None if c < 0 else str(c)} for i, c in enumerate(cluster_of)
                    ],
                    "sample_correct": [c >= 0 and correct[c] for c in cluster_of],
                    "cluster_of": cluster_of,
                    "cluster_correct": correct,
                }
            )
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="a tiny size, to prove the script still runs (CI)")
    args = parser.parse_args()
    shapes = [(1000, 8, 4), (125, 64, 8)] if not args.smoke else [(40, 8, 4), (5, 64, 8)]
    print(f"{'problems × samples':20} {'calls':>7} {'summary s':>10} {'maj@k values':>13}")
    for problems, n, classes in shapes:
        run = records(problems, n, classes)
        started = time.perf_counter()
        summary = summarize(run, LedgerTotals())
        seconds = time.perf_counter() - started
        print(f"{f'{problems} × {n}':20} {problems * n:7d} {seconds:10.2f} {len(summary.maj_at_k or {}):13d}")


if __name__ == "__main__":
    main()
