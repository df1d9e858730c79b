"""TRT orchestration: 30 problems × T=8 × K=4 against a model with fixed latency.

Each round is a chain of two dependent calls (the K rollouts in parallel, then the reflection), after one
strategy call, so the critical path per problem is (1 + 2·T) × latency; problems run in parallel. Goal:
wall time ≤ 1.2× the critical path, and < 1 ms engine overhead per call (CPU time of this process per call).

    .venv/bin/python perf/trt_orchestration.py [--latency 0.1] [--problems 30] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from pathlib import Path

from testtime.core.cache import CompletionCache
from testtime.core.checkpoint import RoundCheckpoints
from testtime.core.ledger import Ledger
from testtime.core.records import Message, Problem, Reference
from testtime.core.rollout import RolloutEngine
from testtime.methods import MethodContext
from testtime.methods.plan import ProblemSet, RunBase
from testtime.methods.trt.method import TRT
from testtime.models.fake import FakeModel
from testtime.run.directory import RunDir
from testtime.run.loop import ProblemList, Session, unlabelled_of


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--problems", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--rollouts", type=int, default=4)
    parser.add_argument("--smoke", action="store_true", help="a tiny size, to prove the script still runs (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.problems, args.rounds, args.rollouts, args.latency = 3, 2, 2, 0.01
    ledger = Ledger()
    engine = RolloutEngine(
        FakeModel(latency_s=args.latency),
        model_name="fake:",
        cache=CompletionCache(None),
        ledger=ledger,
        concurrency=args.problems * args.rollouts,
    )
    problems = [Problem(id=f"p{i}", domain="math", statement=f"What is {i} + {i}?") for i in range(args.problems)]
    method = TRT(rounds=args.rounds, rollouts=args.rollouts)
    ctx = MethodContext(
        engine=engine,
        plan=method.plan(ProblemSet("math"), RunBase()),
        checkpoints=RoundCheckpoints(None),
        prompt=lambda p: [Message(role="user", content=p.statement)],
    )

    folder = Path(tempfile.mkdtemp(prefix="trt-orchestration-"))
    directory = RunDir.create(folder / "run")

    async def solve_all() -> int:
        """Through the run loop, as `testtime run` answers a batch (results graded and appended as they land)."""
        session = Session(directory, engine, unlabelled_of)
        references = {p.id: Reference(problem_id=p.id) for p in problems}
        await session.drive(ProblemList(problems, problems, references, directory.path), method.learner(ctx), 256)
        return len(directory.read_results())

    wall, cpu = time.perf_counter(), time.process_time()
    solved = asyncio.run(solve_all())
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    shutil.rmtree(folder)
    critical = (1 + 2 * args.rounds) * args.latency
    calls = ledger.totals.calls
    assert solved == args.problems, f"{solved} of {args.problems} problems came back"
    print(f"{args.problems} problems × T={args.rounds} × K={args.rollouts}, latency {args.latency * 1000:.0f} ms")
    print(f"{'calls':34} {calls:10d}   (expected {args.problems * (1 + args.rounds * (args.rollouts + 1))})")
    print(f"{'critical path s':34} {critical:10.2f}")
    print(f"{'wall s':34} {wall:10.2f}   ({wall / critical:.2f}× critical path)")
    print(f"{'CPU per call ms (engine + method)':34} {cpu / calls * 1000:10.2f}")


if __name__ == "__main__":
    main()
