"""Selection accuracy of the execution selector's three ranks — agreement (CodeT-like), tests_passed (TRT's
paper), matrix (CoSPlay-like, `testtime/selectors/matrix.py`) — on scripted, pyfunc-shaped problems, over the
accuracy of the model's tests and of its programs.

Each problem: 8 candidate programs, each right with probability `p` (candidate accuracy), else one of three wrong
behaviours; one public example (the right output; a wrong behaviour passes it half the time, as a wrong pyfunc
function often agrees with the one example shown); 5 written tests, each with the right expected output with
probability `q` (test accuracy), else a wrong one: half the time the most common wrong behaviour's output (a shared
misconception of writer and coder), half the time an output no program gives. A wrong behaviour gives the right
output on an input with probability 0.3. The selector's own `_choose` judges the synthetic runs (no sandbox: what is
compared is the ranking); a selection is right when the chosen program behaves rightly. "any right" is the share of
problems with at least one right candidate (the ceiling).

    .venv/bin/python perf/matrix.py              # 200 problems per cell
    .venv/bin/python perf/matrix.py --smoke      # 20
"""

from __future__ import annotations

import argparse
import random

from testtime.core.records import Candidate
from testtime.core.selection import SuiteStats
from testtime.sandbox import ExecutionReport, TestVerdict
from testtime.sandbox.judge import output_digest
from testtime.selectors.execution import ExecutionSelector

CANDIDATES, WRITTEN, WRONG_BEHAVIOURS, COINCIDENCE = 8, 5, 3, 0.3
RANKS = ("agreement", "tests_passed", "matrix")


def problem(rng: random.Random, p: float, q: float) -> tuple[list[int], list[list[str]], list[str | None], str]:
    """Candidates' behaviours (0 right), each behaviour's outputs on the public example then the written inputs,
    the written tests' expected outputs, and the public example's expected output."""
    behaviours = [0 if rng.random() < p else rng.randint(1, WRONG_BEHAVIOURS) for _ in range(CANDIDATES)]
    right = [f"r{j}" for j in range(1 + WRITTEN)]
    outputs = [right]
    for b in range(1, WRONG_BEHAVIOURS + 1):
        public = right[0] if rng.random() < 0.5 else f"w{b}-0"
        outputs.append(
            [public] + [right[j] if rng.random() < COINCIDENCE else f"w{b}-{j}" for j in range(1, 1 + WRITTEN)]
        )
    common = max(range(1, WRONG_BEHAVIOURS + 1), key=lambda b: (behaviours.count(b), -b))
    expected: list[str | None] = []
    for j in range(1, 1 + WRITTEN):
        if rng.random() < q:
            expected.append(right[j])
        else:
            expected.append(outputs[common][j] if rng.random() < 0.5 else f"nobody-{j}")
    return behaviours, outputs, expected, right[0]


def chosen_right(
    rank: str, behaviours: list[int], outputs: list[list[str]], expected: list[str | None], public: str
) -> bool:
    selector = ExecutionSelector(rank=rank)
    candidates = [Candidate(index=i, text="", answer=f"program {b}") for i, b in enumerate(behaviours)]
    written = [(f"input {j}", expected[j] if rank != "agreement" else None) for j in range(WRITTEN)]
    reports = {}
    for i, b in enumerate(behaviours):
        tests = [_verdict(outputs[b][0], public)]
        tests += [_verdict(outputs[b][1 + j], written[j][1]) for j in range(WRITTEN)]
        reports[i] = ExecutionReport(backend="simulated", tests=tests)
    selection = selector._choose(candidates, reports, 1, written, SuiteStats(requested=WRITTEN))
    return selection.index is not None and behaviours[selection.index] == 0


def _verdict(output: str, expected: str | None) -> TestVerdict:
    passed = expected is None or output == expected
    return TestVerdict(verdict="pass" if passed else "wrong_answer", output=output,
                       output_digest=output_digest(output), clean=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="20 problems a cell")
    args = parser.parse_args()
    count = 20 if args.smoke else args.problems
    print(
        f"selection accuracy over {count} scripted problems a cell ({CANDIDATES} candidates, {WRITTEN} written tests)"
    )
    print(f"{'test acc':>8}  {'cand acc':>8}  {'any right':>9}  " + "  ".join(f"{r:>12}" for r in RANKS))
    for q in (0.3, 0.5, 0.8):
        for p in (0.2, 0.5):
            rng = random.Random(f"{args.seed}-{q}-{p}")
            drawn = [problem(rng, p, q) for _ in range(count)]
            ceiling = sum(0 in b for b, *_ in drawn) / count
            shares = [sum(chosen_right(rank, *d) for d in drawn) / count for rank in RANKS]
            print(f"{q:>8.1f}  {p:>8.1f}  {ceiling:>9.3f}  " + "  ".join(f"{s:>12.3f}" for s in shares))


if __name__ == "__main__":
    main()
