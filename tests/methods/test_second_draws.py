"""A method that asks the engine twice for one problem gets new samples the second time: a vote over 2 + 2 draws
counts four samples, not two copied twice; the run pays for all of them once, and a resume meets every one of them
in the cache."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

TWICE = textwrap.dedent(
    """
    from testtime.api import METHODS, PerProblem, ProblemResult, make_candidates


    @METHODS.register("twice", help="two draws of two samples")
    class Twice(PerProblem):
        name = "twice"

        async def solve(self, problem, ctx):
            messages, params = ctx.prompt(problem), ctx.sampled("solve")
            first = await ctx.engine.sample(messages, 2, params, problem_id=problem.id)
            more = await ctx.engine.sample(messages, 2, params, problem_id=problem.id)
            candidates = make_candidates(problem, [*first, *more])
            return ProblemResult(problem_id=problem.id, prediction=candidates[0].answer, candidates=candidates)
    """
)


def _paid(out: Path) -> list[dict]:
    lines = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    return [e for e in lines if e.get("kind", "call") == "call" and not e.get("cached")]


def test_a_second_draw_is_new_samples_and_a_resume_pays_nothing(tmp_path: Path, testtime_process) -> None:
    plugin, out = tmp_path / "twice.py", tmp_path / "run"
    plugin.write_text(TWICE)
    result = testtime_process(
        "--plugin", str(plugin), "run", "--method", "twice", "--bench", "arith", "--limit", "3",
        "--model", "fake:echo", "--temperature", "0.7", "--out", str(out), "--quiet",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (
        len(_paid(out)) == 12
    )  # 3 problems × (2 + 2): before fresh draws it paid 6, the second draw copies of the first
    answered = {r["problem_id"]: [c["call"] for c in r["candidates"]] for r in _results(out)}
    assert all(len(set(calls)) == 4 for calls in answered.values())
    # killed before the last two results were written: the resume answers them again from the cache
    (out / "results.jsonl").write_text((out / "results.jsonl").read_text().splitlines()[0] + "\n")
    result = testtime_process("--plugin", str(plugin), "run", "--resume", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    assert len(_paid(out)) == 12  # nothing new was paid
    assert {r["problem_id"]: [c["call"] for c in r["candidates"]] for r in _results(out)} == answered


def _results(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
