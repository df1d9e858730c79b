"""Execution-based selection end to end: K=8 candidates × 30 generated inputs on 10 problems, through the
selector and the sandbox (test inputs come from a scripted model, so only selection and execution are timed).

Candidates are sieve-style programs (a few ms of work per test, like typical contest solutions) in variants
that disagree on some inputs. Sandbox overhead = job wall time in the sandbox minus the programs' own run
time, as a share of the sandbox time. Goal: < 25% on the Docker warm pool.

    .venv/bin/python perf/selection.py [--sandbox docker|bwrap] [--problems 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import time

from testtime.core.cache import CompletionCache
from testtime.core.calls import Calls
from testtime.core.ledger import Ledger
from testtime.core.records import Candidate, Problem, SamplingParams
from testtime.core.rollout import RolloutEngine
from testtime.models.fake import FakeModel
from testtime.sandbox import ExecutionReport, Sandbox
from testtime.sandbox.choose import open_sandbox
from testtime.selectors import SelectionContext
from testtime.selectors.execution import ExecutionSelector

SIEVE = """n = int(input())
sieve = bytearray([1]) * (n + 1)
sieve[0:2] = b"\\x00\\x00"
for i in range(2, int(n ** 0.5) + 1):
    if sieve[i]:
        sieve[i * i :: i] = bytearray(len(range(i * i, n + 1, i)))
print(sum(sieve) {tweak})"""
TWEAKS = ["", "", "", "+ 0", "+ (n % 7 == 0)", "- (n % 11 == 0)", "+ 0 * n", "+ (n % 5 == 1)"]


class Timed:
    """Wraps a sandbox to add up job wall time and in-program time."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox, self.job_seconds, self.program_seconds = sandbox, 0.0, 0.0

    async def arun(self, *args: object) -> ExecutionReport:
        report = await self.sandbox.arun(*args)  # type: ignore[arg-type]
        self.job_seconds += report.seconds
        self.program_seconds += sum(t.seconds for t in report.tests)
        return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sandbox", default="docker")
    parser.add_argument("--problems", type=int, default=10)
    parser.add_argument(
        "--max-n", type=int, default=200_000, help="sieve bound: 2e5 ≈ 1 ms of program time per test, 2e6 ≈ 10 ms"
    )
    parser.add_argument("--smoke", action="store_true", help="a tiny size, to prove the script still runs (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.problems, args.max_n = 1, 2_000
    rng = random.Random(0)
    selector = ExecutionSelector(test_inputs=30, timeout_s=6.0)
    walls = []
    with open_sandbox(args.sandbox) as sandbox:
        timed = Timed(sandbox)
        for p in range(args.problems):
            inputs = json.dumps([str(rng.randint(args.max_n // 10, args.max_n)) for _ in range(30)])
            engine = RolloutEngine(
                FakeModel(lambda messages, params, text=inputs: text),
                model_name="fake:",
                cache=CompletionCache(None),
                ledger=Ledger(),
            )
            candidates = [Candidate(index=k, text="", answer=SIEVE.format(tweak=TWEAKS[k])) for k in range(8)]
            problem = Problem(id=f"p{p}", domain="code", statement="Count primes up to N.")
            calls = Calls(engine, {"tests": SamplingParams()}, problem.id)
            context = SelectionContext(seed=0, calls=calls, sandbox=timed)  # type: ignore[arg-type]
            started = time.perf_counter()
            selection = asyncio.run(selector.select(problem, candidates, context))
            walls.append(time.perf_counter() - started)
            assert selection.index in (0, 1, 2, 3, 6), selection.evidence
    overhead = timed.job_seconds - timed.program_seconds
    print(f"{args.problems} problems × 8 candidates × 30 inputs on {args.sandbox}")
    print(f"{'wall s/problem (median)':28} {sorted(walls)[len(walls) // 2]:8.2f}")
    print(f"{'sandbox job time s':28} {timed.job_seconds:8.2f}")
    print(f"{'programs own run time s':28} {timed.program_seconds:8.2f}")
    print(f"{'sandbox overhead share':28} {overhead / timed.job_seconds:8.1%}")
    print(f"{'overhead per test run ms':28} {overhead / (args.problems * 8 * 30) * 1000:8.2f}")


if __name__ == "__main__":
    main()
