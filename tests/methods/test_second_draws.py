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
    return [e for e in lines if e.get("kind", "model_call") == "model_call" and not e.get("cached")]


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


def test_a_method_resuming_from_its_own_round_draws_what_the_killed_run_would_have() -> None:
    """A plugin that checkpoints its rounds and skips them on resume once got round 1's cached samples back as
    round 2's draw (its call counter started again at 0): the checkpoint carries the engine's counters."""
    import asyncio

    from testtime.api import PerProblem, ProblemResult, make_candidates
    from testtime.core.cache import CompletionCache
    from testtime.core.checkpoint import RoundCheckpoints
    from testtime.core.ledger import Ledger
    from testtime.core.records import Message, Problem
    from testtime.core.rollout import RolloutEngine
    from testtime.methods.plan import ProblemSet, RunBase
    from testtime.models.fake import FakeModel
    from testtime.run.engine import method_calls, method_context

    class Rounds(PerProblem):
        """Two rounds of two samples of one prompt, no step: the pattern the plugins page shows."""

        name = "rounds"
        stop_after: int | None = None

        async def solve(self, problem, ctx):  # type: ignore[no-untyped-def]
            saved = ctx.checkpoints.last(problem.id)
            texts = list(saved["texts"]) if saved else []
            for t in range((saved or {"round": 0})["round"] + 1, 3):
                drawn = await ctx.on(problem).sample("solve", 2)
                texts += [c.text for c in drawn]  # each sample's text is its seed's
                ctx.checkpoints.append(problem.id, t, {"texts": texts})
                if t == self.stop_after:
                    raise KeyboardInterrupt  # killed after round 1
            candidates = make_candidates(problem, [])
            return ProblemResult(problem_id=problem.id, prediction="|".join(texts), candidates=candidates)

    problem = Problem(id="p", domain="math", statement="What is 1+1?")
    cache = CompletionCache(None)

    def solve(method: Rounds, checkpoints: RoundCheckpoints) -> str | None:
        plan = method.plan(ProblemSet("math"), RunBase(temperature=0.7))
        seeded = FakeModel(lambda messages, params: f"seed {params.seed}")
        engine = RolloutEngine(seeded, model_name="fake:", cache=cache, ledger=Ledger())
        ctx = method_context(engine, plan, lambda p: [Message(role="user", content=p.statement)], 0,
                             checkpoints=checkpoints)  # fmt: skip

        async def go() -> str | None:
            with method_calls(ctx):
                return (await method.solve(problem, ctx)).prediction

        return asyncio.run(go())

    whole = solve(Rounds(), RoundCheckpoints(None))
    killed, saved = Rounds(), RoundCheckpoints(None)
    killed.stop_after = 1
    try:
        solve(killed, saved)
    except KeyboardInterrupt:
        pass
    resumed = solve(Rounds(), saved)  # a fresh engine, as a resumed process has
    assert whole is not None and len(set(whole.split("|"))) == 4  # four draws, four seeds
    assert resumed == whole
