"""`--preset released` against a port of the released math loop (`AIME/scripts/vllm_kflow_qwen.py`, trt.md §3):
the same scripted generations drive both, testtime through the real `run` path (a real HTTP server answering
in order), and the per-round answers, the wrong-answer lists and the reference summaries each prompt carried
must agree. The generations visit every case the released loop decides unambiguously: a colon after the
header, a bold header, a truncated round with no boxed answer, a changed answer under an "N/A" report."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from testtime.models.mock_server import MockChatServer

GENERATIONS = [
    "<think>Five, no: twelve.</think>\n[Summary]: Counting the cases gives 12.\n[Answer]: \\boxed{12}",
    "[Error Report]: The answer cannot be 12, because the cases overlap. The correct approach is "
    "inclusion-exclusion.\n[Summary]: Inclusion-exclusion gives 7.\n[Answer]: \\boxed{7}",
    "**[Error Report]** The answer cannot be 7, because one case was missed.\n[Summary] Recounting gives 9: "
    "the missed case adds 2.\n[Answer] \\boxed{9}",
    "<think>Suppose there are 3 more cases to check, then",  # truncated: no boxed answer, no sections
    "[Error Report]: N/A\n[Summary]: I agree with the count of 9.\n[Answer]: \\boxed{9}",
    "[Error Report]: N/A\n[Summary]: Nine again.\n[Answer]: \\boxed{9}",
]


def _extract(text: str) -> int | None:
    boxed = re.findall(r"\\boxed{(-?\d+)}", text)
    if boxed:
        return int(boxed[-1])
    stray = re.findall(r"-?\d+", text)
    return int(stray[-1]) if stray else None


def _tidy(text: str) -> str:
    colon = text.find(":")
    if colon != -1:
        text = text[:colon] + text[colon + 1 :].lstrip()
    return text[0].lower() + text[1:] if len(text) > 1 else text.lower()


def released_loop(generations: list[str]) -> tuple[list[int | None], list[str], list[str]]:
    """The released script's bookkeeping, one problem, one generation per round: the prediction after each
    round, and the wrong-answer list and reference summary each later round's prompt carried."""
    tracker: list[int | None] = []
    drops: list[int] = []
    knowledge: list[str] = []
    lists: list[str] = []
    references: list[str] = []
    for reflex, generation in enumerate(generations):
        if reflex > 0:
            x = generations[reflex - 1].split("</think>")[-1]
            references.append(_tidy(x.split("[Summary]")[-1].strip().split("[Answer]")[0].strip()))
            this_answer = _extract(x.split("[Answer]")[-1].strip())
            if len(tracker) > 1 and this_answer != tracker[-2] and "[Error Report]" in x:
                drops.append(tracker[-2])  # type: ignore[arg-type]
                knowledge.append(_tidy(x.split("[Error Report]")[-1].split("[Summary]")[0].strip()))
            seen: dict[int, int] = {}
            unique = []
            for i in range(len(knowledge) - 1, -1, -1):
                if seen.get(drops[i], 0) >= 2:
                    continue
                seen[drops[i]] = seen.get(drops[i], 0) + 1
                unique.append(knowledge[i])
            lists.append("\n".join(f"**Wrong Answer {i + 1}**: {k}" for i, k in enumerate(unique)) or "N/A")
        tracker.append(_extract(generation))
    return tracker, lists, references


def _between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0].strip()


def test_the_released_preset_matches_the_released_loop_round_by_round(
    tmp_path: Path, testtime_cli: Callable[..., Any]
) -> None:
    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps({"id": "p1", "problem": "How many cases are there?", "answer": "9"}) + "\n")
    prompts: list[str] = []

    def reply(messages: list[dict[str, Any]]) -> str:
        prompts.append(messages[-1]["content"])
        return GENERATIONS[len(prompts) - 1]

    out = tmp_path / "run"
    with MockChatServer(reply=reply) as server:
        done = testtime_cli(
            "run", "--method", "trt", "--preset", "released", "-T", str(len(GENERATIONS)), "--bench", str(problems),
            "--model", "openai:mock", "--api-base", server.url, "--out", str(out), "--quiet",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    predictions, lists, references = released_loop(GENERATIONS)
    assert predictions == [12, 7, 9, 3, 9, 9]  # the port itself, on the chain the issue reports
    records = [json.loads(line)["record"] for line in (out / "rounds.jsonl").read_text().splitlines()]
    assert [int(r["selected_answer"]) for r in records] == predictions
    assert len(prompts) == len(GENERATIONS)  # K=1, no strategies, no reflection: one call per round
    assert "Wrong Answer List" not in prompts[0] and "Reference Solution" not in prompts[0]
    shown_lists = [_between(p, "## Wrong Answer List", "Write exactly") for p in prompts[1:]]
    shown_references = [_between(p, "## Reference Solution", "## Wrong Answer List") for p in prompts[1:]]
    assert shown_lists == lists and shown_references == references
    assert lists[-1].startswith("**Wrong Answer 1**: n/A")  # the drop of 3 under "N/A", as the script keeps it
    assert all(p.startswith("How many cases are there?") for p in prompts)
    prediction = json.loads((out / "predictions.jsonl").read_text())
    # its confidence: 9 is 3 of the 6 answers concluded over the rounds (the round at hand alone: always 1.0)
    assert prediction["prediction"] == "9" and prediction["confidence"] == 0.5


def test_the_paper_preset_keeps_its_answer_through_a_truncated_round(
    tmp_path: Path, testtime_cli: Callable[..., Any]
) -> None:
    """The difference the README lists: the paper loop never manufactures an answer from a stray number."""
    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps({"id": "p1", "problem": "How many cases are there?"}) + "\n")
    calls = iter(GENERATIONS)
    out = tmp_path / "run"
    with MockChatServer(reply=lambda messages: next(calls)) as server:
        done = testtime_cli(
            "run", "--method", "trt", "-T", str(len(GENERATIONS)), "-K", "1", "--no-strategies", "--no-knowledge",
            "--exclusivity-rule", "latest", "--bench", str(problems), "--model", "openai:mock", "--api-base",
            server.url, "--out", str(out), "--quiet",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = [json.loads(line)["record"] for line in (out / "rounds.jsonl").read_text().splitlines()]
    assert [r["selected_answer"] for r in records if r["round"]] == ["12", "7", "9", "9", "9", "9"]
