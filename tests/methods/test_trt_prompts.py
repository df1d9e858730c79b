"""What TRT's math solvers are shown agrees with what its selection decided, through the real `run` path (a
real HTTP server answering from a script); error reports are read however a model dresses the header."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.methods.test_trt import run, scripted
from tests.methods.test_trt_math import text
from testtime.methods.trt.refutation import refutation
from testtime.models.mock_server import MockChatServer

# Round 1: 7, 7, 7, 5. Round 2: one rollout refutes 7 (answers 9), two refute 5 (answer 7), one agrees with 7.
# Round 3: one rollout refutes 9 (answers 7). Then 7 stands at 6 rollouts against 1 refutation (kept), 5 at 1
# against 2 (rejected), 9 at 1 against 1 (disputed: not rejected, not chosen).
ROUNDS = [["7", "7", "7", "5"], ["9!7", "7!5", "7!5", "7?"], ["7!9", "7?", "7?", "7?"], ["7?", "7?", "7?", "7?"]]


def _sections(prompt: str) -> dict[str, str]:
    parts = re.split(r"^### ", prompt, flags=re.MULTILINE)
    return {part.split("\n", 1)[0]: part.split("\n", 1)[1] if "\n" in part else "" for part in parts[1:]}


def test_solvers_are_never_told_the_chosen_answer_is_wrong(tmp_path: Path, testtime_cli: Callable[..., Any]) -> None:
    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps({"id": "p", "problem": "What is the answer?"}) + "\n")
    specs = iter([spec for round_ in ROUNDS for spec in round_])
    lock = threading.Lock()
    prompts: list[str] = []

    def reply(messages: list[dict[str, Any]]) -> str:
        prompt = messages[-1]["content"]
        shown = re.search(r"An earlier attempt concluded: (\S+)", prompt)
        with lock:
            prompts.append(prompt)
            return text(next(specs), shown.group(1) if shown else None)

    out = tmp_path / "run"
    with MockChatServer(reply=reply) as server:
        done = testtime_cli(
            "run", "--method", "trt", "-T", "4", "-K", "4", "--no-strategies", "--no-knowledge", "--bench",
            str(problems), "--bench-opt", "domain=math", "--model", "openai:mock", "--api-base", server.url,
            "--out", str(out), "--quiet",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = [json.loads(line)["record"] for line in (out / "rounds.jsonl").read_text().splitlines()]
    assert [r["selected_answer"] for r in records] == ["7", "7", "7", "7"]
    assert records[1]["selection"]["evidence"]["rejected"] == ["5"]
    third, fourth = _sections(prompts[8]), _sections(prompts[12])  # the first prompt of rounds 3 and 4
    for sections in (third, fourth):
        assert "An earlier attempt concluded: 7" in sections["Earlier answer (may be wrong)"]
        listed = "".join(v for k, v in sections.items() if k.startswith(("Wrong answers", "Disputed answers")))
        assert "Answer 7:" not in listed  # refuted once, reached six times: never listed against itself
        assert [k for k in sections if k.startswith("Wrong answers")] and "Answer 5:" in listed
    wrong_4 = next(v for k, v in fourth.items() if k.startswith("Wrong answers"))
    disputed_4 = next(v for k, v in fourth.items() if k.startswith("Disputed answers"))
    assert "Answer 9:" in disputed_4 and "Answer 9:" not in wrong_4 and "Answer 5:" in wrong_4
    assert not any(k.startswith("Disputed answers") for k in third)  # nothing refuted is still standing


@pytest.mark.parametrize(
    "report",
    [
        "[Error Report]: N/A",  # the released code's own format
        "[Error Report] N/A",
        "**[Error Report]** N/A",
        "**[Error Report]:** n/a",
        "## [Error Report]\nN/A",
        "[Error Report] - None",
    ],
)
def test_an_agreeing_report_refutes_nothing(report: str) -> None:
    chain = f"{report}\n[Summary]: I computed it again.\n\\boxed{{9}}"
    assert refutation(chain, "9", ["7"], "7") is None


@pytest.mark.parametrize(
    "dressed",
    [
        "[Error Report]: The answer cannot be 7 because the base case is wrong.\n[Summary] I computed 9.",
        "**[Error Report]** The answer cannot be 7 because the base case is wrong.\n**[Summary]** I computed 9.",
        "## [Error Report]\nThe answer cannot be 7 because the base case is wrong.\n## [Summary]\nI computed 9.",
        "[Error Report] The answer cannot be 7 because the base case is wrong.\n\\boxed{9}",
    ],
)
def test_a_report_ends_at_the_next_header_however_dressed(dressed: str) -> None:
    found = refutation(dressed + "\n\\boxed{9}", "9", ["7"], "7")
    assert found is not None
    target, reason = found
    assert target == "7" and reason == "The answer cannot be 7 because the base case is wrong."


@pytest.mark.parametrize(
    ("report", "target"),
    [
        ("The answer cannot be negative, because squares are not.", "7"),  # names no answer: the incumbent
        ("The answer cannot be odd here.", "7"),
        ("The answer cannot be $\\boxed{12}$ because 12 is too big.", "12"),  # a number, even unseen
        ("The answer cannot be \\frac{1}{2}, since it is an integer.", "\\frac{1}{2}"),
    ],
)
def test_a_named_target_must_look_like_an_answer(report: str, target: str) -> None:
    found = refutation(f"[Error Report] {report}\n\\boxed{{9}}", "9", ["7"], "7")
    assert found is not None and found[0] == target


def test_one_lesson_per_round_by_default_the_cap_an_option() -> None:
    three = json.dumps({"insights": ["Do not guess", "Do not skip the check", "Do not reuse the old answer"]})
    default, _ = run(scripted(lambda prompt, n: "\\boxed{4}", reflection=three), rounds=1, rollouts=2)
    assert [item.text for item in default.rounds[0].knowledge] == ["Do not guess"]  # the reference keeps one
    more, _ = run(scripted(lambda prompt, n: "\\boxed{4}", reflection=three), rounds=1, rollouts=2, lessons_per_round=3)
    assert len(more.rounds[0].knowledge) == 3
