"""`--selector reflect` (SR-TTRL's reflective pseudo-label, weight-free) against a scripted server: where the
reflection names a minority class it is the label, where it names nothing or an answer no sample gave the majority
is, said so; one class asks nothing; the reflection is one greedy call of its own kind, on the ledger. The
installed command, stderr to a file."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from tests.cli.test_as_users_run import logged
from testtime.core.ledger import read_entries
from testtime.models.mock_server import MockChatServer


def _served(votes: list[str], reflection: str) -> tuple[MockChatServer, list[dict[str, Any]]]:
    """Solve calls get `votes` in turn; the reflection gets `reflection`; every reflection prompt is kept."""
    seen: list[dict[str, Any]] = []
    turn = itertools.count()

    def reply(messages: list[dict[str, Any]]) -> str:
        prompt = messages[-1]["content"]
        if "Which final answer is correct?" in prompt:
            seen.append({"prompt": prompt})
            return reflection
        return votes[next(turn) % len(votes)]

    return MockChatServer(reply=reply), seen


def _run(folder: Path, server: MockChatServer, *extra: str) -> tuple[int, str, Path]:
    folder.mkdir(exist_ok=True)
    out = folder / "run"
    status, said = logged(folder, "run", "--bench", "arith", "--limit", "1", "--n", "3", "--concurrency", "1",
                          "--model", "openai:mock", "--api-base", server.url, "--out", str(out), *extra)  # fmt: skip
    return status, said, out


def test_a_reflection_naming_a_minority_class_is_the_label(tmp_path: Path) -> None:
    votes = ["It is \\boxed{7}.", "It is \\boxed{9}.", "It is \\boxed{7}."]
    server, seen = _served(votes, "Attempt B is right: \\boxed{9}")
    with server:
        status, said, out = _run(tmp_path / "reflect", server, "--selector", "reflect")
        plain, _, majority_out = _run(tmp_path / "plain", server)
    assert status == 0 and plain == 0, said
    [record] = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    [majority] = [json.loads(line) for line in (majority_out / "results.jsonl").read_text().splitlines()]
    assert majority["prediction"] == "7" and record["prediction"] == "9"
    evidence = record["selection"]["evidence"]
    assert evidence["kind"] == "reflection" and evidence["majority_answer"] == "7"
    assert evidence["reflected_answer"] == "9" and evidence["differs"] and not evidence["fell_back"]
    assert "final answer: 7" in seen[0]["prompt"] and "final answer: 9" in seen[0]["prompt"]
    assert "samples" not in seen[0]["prompt"].split("ended:")[1]  # the class sizes are not shown
    reflections = [e for e in read_entries(out / "ledger.jsonl") if e.purpose == "reflect"]
    assert len(reflections) == 1
    config = json.loads((out / "config.json").read_text())
    assert config["effective"]["sampling"]["reflect"]["temperature"] == 0.0  # greedy, whatever the run's


def test_a_reflection_that_names_no_class_falls_back_to_the_majority(tmp_path: Path) -> None:
    for reflection, why in (("I cannot tell.", "boxed no answer"), ("\\boxed{12}", "is no sample's")):
        server, _ = _served(["It is \\boxed{7}.", "It is \\boxed{9}.", "It is \\boxed{7}."], reflection)
        folder = tmp_path / why.replace(" ", "-")
        with server:
            status, said, out = _run(folder, server, "--selector", "reflect")
        assert status == 0, said
        [record] = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        evidence = record["selection"]["evidence"]
        assert record["prediction"] == "7" and evidence["fell_back"] and why in evidence["reason"]


def test_one_answer_class_asks_no_reflection(tmp_path: Path) -> None:
    server, seen = _served(["It is \\boxed{7}."], "\\boxed{9}")
    with server:
        status, said, out = _run(tmp_path, server, "--selector", "reflect")
    assert status == 0 and seen == [], said
    assert not [e for e in read_entries(out / "ledger.jsonl") if e.purpose == "reflect"]
