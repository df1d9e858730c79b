"""A plugin's calls through the handle, run as a user runs them: the installed command in a fresh process, stderr
to a file, no --quiet, against a real HTTP server that records what was sent. A kind of call of the plugin's own
runs, is ledgered and recorded with exactly what was sent; a plugin on the contract before the handle runs with
one warning, and a call of it that would make the manifest untrue is refused in one line before it is paid."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from testtime.core.ledger import read_entries
from testtime.models.mock_server import MockChatServer

TESTTIME = str(Path(sys.executable).with_name("testtime"))

CRITIC = """
from testtime.api import METHODS, Message, PerProblem, Plan, ProblemResult, make_candidates


@METHODS.register("critic", help="one answer, then one greedy critique of it")
class Critic(PerProblem):
    def plan(self, problems, base, stream=False):
        params = base.sampling()
        greedy = params.model_copy(update={"temperature": 0.0, "max_tokens": 40})
        return Plan.of(self, {"solve": params, "critique": greedy}, params, samples=1, calls=2)

    async def solve(self, problem, ctx):
        calls = ctx.on(problem)
        [answer] = await calls.sample("solve")
        await calls.sample("critique", 1, [Message(role="user", content=f"Critique this: {answer.text}")])
        candidates = make_candidates(problem, [answer])
        return ProblemResult(problem_id=problem.id, prediction=candidates[0].answer, candidates=candidates)
"""

OLD = """
from testtime.api import METHODS, Message, PerProblem, Plan, ProblemResult, make_candidates


@METHODS.register("old", help="answers, then reflects, on the contract before the handle")
class Old(PerProblem):
    def plan(self, problems, base, stream=False):
        params = base.sampling()
        return Plan.of(self, {"solve": params, "reflect": params.model_copy(update={"temperature": 0.0})}, params)

    async def solve(self, problem, ctx):
        done = await ctx.engine.sample(ctx.prompt(problem), 1, ctx.sampled("solve"), problem_id=problem.id)
        reflect = [Message(role="user", content="Reflect on: " + done[0].text)]
        await ctx.engine.sample(reflect, 1, REFLECT_PARAMS, problem_id=PROBLEM_ID, purpose="reflect")
        candidates = make_candidates(problem, done)
        return ProblemResult(problem_id=problem.id, prediction=candidates[0].answer, candidates=candidates)
"""


def run(tmp_path: Path, source: str, method: str, upstream: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    plugin = tmp_path / f"{method}.py"
    plugin.write_text(source)
    out, log = tmp_path / "run", tmp_path / "stderr.log"
    with log.open("w") as stderr:
        done = subprocess.run(
            [TESTTIME, "run", "--plugin", str(plugin), "--method", method, "--bench", "arith", "--limit", "3",
             "--model", "openai:mock", "--api-base", upstream, "--temperature", "0.9", "--out", str(out)],
            stdout=subprocess.PIPE, stderr=stderr, text=True, timeout=120, cwd=tmp_path,
        )  # fmt: skip
    return subprocess.CompletedProcess(done.args, done.returncode, done.stdout, log.read_text()), out


def test_a_plugins_own_kind_of_call_runs_is_ledgered_and_recorded_as_sent(tmp_path: Path) -> None:
    with MockChatServer() as upstream:
        done, out = run(tmp_path, CRITIC, "critic", upstream.url)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "FutureWarning" not in done.stderr
    lines = read_entries(out / "ledger.jsonl")
    critiques = [e for e in lines if e.purpose == "critique"]
    assert len(critiques) == 3 and {e.problem_id for e in critiques} == {f"arith-d2-{i}" for i in range(3)}
    recorded = json.loads((out / "config.json").read_text())["effective"]["sampling"]
    sent = {"critique" if "Critique this" in str(b["messages"]) else "solve": b for b in upstream.bodies}
    for kind in ("solve", "critique"):
        assert (sent[kind]["temperature"], sent[kind]["max_tokens"]) == (
            recorded[kind]["temperature"],
            recorded[kind]["max_tokens"],
        )
    assert recorded["critique"]["temperature"] == 0.0 and recorded["solve"]["temperature"] == 0.9


def test_an_old_plugin_sending_other_sampling_than_recorded_is_refused_before_that_call(tmp_path: Path) -> None:
    """The issue's case: a plan that makes `reflect` greedy, a call sent at the solve sampling with
    purpose="reflect". Exit 0 with a manifest saying 0.0 where 0.9 was sent is what must never happen."""
    source = OLD.replace("REFLECT_PARAMS", 'ctx.sampled("solve")').replace("PROBLEM_ID", "problem.id")
    with MockChatServer() as upstream:
        done, out = run(tmp_path, source, "old", upstream.url)
    assert done.returncode == 1
    said = done.stderr.strip().splitlines()
    assert said[-1].startswith("error: the method broke its plan: a 'reflect' call sending temperature 0.9")
    assert "Traceback" not in done.stderr
    assert [s for s in said if "FutureWarning" in s and "ctx.on(problem).sample('solve', n)" in s]
    assert not [b for b in upstream.bodies if "Reflect on" in str(b["messages"])]  # never sent, never paid
    assert not [e for e in read_entries(out / "ledger.jsonl") if e.purpose == "reflect"]


def test_an_old_plugin_that_keeps_to_its_plan_runs_with_one_warning(tmp_path: Path) -> None:
    source = OLD.replace("REFLECT_PARAMS", 'ctx.sampled("reflect")').replace("PROBLEM_ID", "problem.id")
    with MockChatServer() as upstream:
        done, _ = run(tmp_path, source, "old", upstream.url)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("FutureWarning") == 1
    reflections = [b for b in upstream.bodies if "Reflect on" in str(b["messages"])]
    assert len(reflections) == 3 and {b["temperature"] for b in reflections} == {0.0}


def test_an_old_plugins_call_tied_to_no_problem_is_refused_in_one_line(tmp_path: Path) -> None:
    source = OLD.replace("REFLECT_PARAMS", 'ctx.sampled("reflect")').replace("PROBLEM_ID", '""')
    with MockChatServer() as upstream:
        done, out = run(tmp_path, source, "old", upstream.url)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "error: the method broke its plan: a 'reflect' call tied to no problem: ask through ctx.on(problem), "
        "which names it on every line"
    )
    assert not [b for b in upstream.bodies if "Reflect on" in str(b["messages"])]
    assert all(e.problem_id for e in read_entries(out / "ledger.jsonl"))
