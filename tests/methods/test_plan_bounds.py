"""A plan bounds what a method may ask, not only its kinds: a plugin asking for 10^9 samples against a plan of one
pays nothing and the run ends in one line; a count or messages that are not one are one line too, never a
traceback. As users run it: the installed command, stderr to a file."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.cli.test_as_users_run import logged
from testtime.core.ledger import read_entries

GREEDY_PLUGIN = textwrap.dedent(
    '''
    """A method whose plan says one sample, and whose solve asks for something else."""
    from testtime.api import METHODS, Message, PerProblem, Plan, ProblemResult, make_candidates


    @METHODS.register("greedy", help="asks for more than it planned")
    class Greedy(PerProblem):
        def plan(self, problems, base, stream=False):
            params = base.sampling()
            return Plan.of(self, {"solve": params}, params, samples=1, calls=2)

        async def solve(self, problem, ctx):
            completions = await ctx.on(problem).sample("solve", N, MESSAGES)
            candidates = make_candidates(problem, completions)
            return ProblemResult(problem_id=problem.id, prediction=candidates[0].answer, candidates=candidates)
    '''
)


def _run_greedy(tmp_path: Path, n: str, messages: str = "None") -> tuple[int, str, Path]:
    plugin = tmp_path / "greedy.py"
    plugin.write_text(GREEDY_PLUGIN.replace("N, MESSAGES", f"{n}, {messages}"))
    out = tmp_path / "run"
    status, said = logged(tmp_path, "run", "--plugin", str(plugin), "--method", "greedy", "--bench", "arith",
                          "--limit", "2", "--model", "fake:echo", "--out", str(out))  # fmt: skip
    return status, said, out


def test_a_plugin_asking_past_its_plan_pays_nothing_and_stops_in_one_line(tmp_path: Path) -> None:
    status, said, out = _run_greedy(tmp_path, "10**9")
    assert status == 1 and "Traceback" not in said, said
    errors = [line for line in said.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].startswith("error: the method broke its plan"), said
    assert "1,000,000,000 samples" in errors[0] and "the 2 model calls its plan declares" in errors[0]
    ledger = out / "ledger.jsonl"
    assert not ledger.exists() or read_entries(ledger) == []  # nothing paid


@pytest.mark.parametrize(
    ("n", "messages", "words"),
    [
        ("0", "None", "n=0"),
        ("1.5", "None", "n=1.5"),
        ("'3'", "None", "n='3'"),
        ("1", "[]", "no messages"),
        ("1", "[{'role': 'user', 'content': 'hi'}]", "messages hold a dict"),
    ],
)
def test_a_count_or_messages_that_are_not_one_are_one_line(tmp_path: Path, n: str, messages: str, words: str) -> None:
    status, said, _ = _run_greedy(tmp_path, n, messages)
    assert status == 1 and "Traceback" not in said, said
    errors = [line for line in said.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].startswith("error: the method broke its plan") and words in errors[0], said
