"""Users' files whose answers are prose: the kind is guessed (and said) from the labels, the prompt is the
problem as written, and a reply is graded equal to its label after SQuAD's normalisation, by a rule that is
explicit and documented."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import write_jsonl
from testtime.benchmarks.dataset import INSTRUCTION, Dataset
from testtime.core.records import Reference

CAPITALS = [
    {"id": "fr", "question": "What is the capital of France? Reply with the city only.", "answer": "Paris"},
    {"id": "jp", "question": "What is the capital of Japan? Reply with the city only.", "answer": "Tokyo"},
    {"id": "it", "question": "What is the capital of Italy? Reply with the city only.", "answer": "Rome"},
]


@pytest.mark.parametrize(
    ("answers", "kind"),
    [
        (["Paris", "George Washington", "the mitochondria"], "text"),
        (["42", "\\frac{1}{2}", "x^2+1"], "math"),
        (["12 meters", "3.5", "Paris"], "math"),  # most labels carry digits: math's relation grades them
        (["True", "False", "7"], "text"),  # most are words: a label column
    ],
)
def test_the_kind_is_guessed_from_the_labels_and_said(tmp_path: Path, answers: list[str], kind: str) -> None:
    rows = [{"question": f"q{i}", "answer": a} for i, a in enumerate(answers)]
    dataset = Dataset(source=str(write_jsonl(tmp_path / "mine.jsonl", rows)))
    assert dataset.domain == kind
    assert ("chosen from the data: prose answers" in dataset.notes[0]) is (kind == "text")


def test_an_explicit_domain_wins_over_the_guess(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "mine.jsonl", CAPITALS)
    assert Dataset(source=str(data)).domain == "text"
    assert Dataset(source=str(data), domain="math").domain == "math"
    unlabelled = write_jsonl(tmp_path / "chats.jsonl", [{"prompt": "Write a haiku."}])
    assert Dataset(source=str(unlabelled)).domain == "text"  # no label, no mathematics asked for
    assert Dataset(source=str(unlabelled), domain="auto").domain == "text"
    assert Dataset(source=str(unlabelled), domain="math").domain == "math"
    sums = write_jsonl(tmp_path / "sums.jsonl", [{"problem": "What is 2 + 3?"}, {"problem": "Compute 7 * 6."}])
    assert Dataset(source=str(sums)).domain == "math"


def test_a_free_form_problem_is_asked_as_written_and_graded_after_normalisation(tmp_path: Path) -> None:
    dataset = Dataset(source=str(write_jsonl(tmp_path / "mine.jsonl", CAPITALS)))
    problems, _ = dataset.load()
    assert problems[0].domain == "text"
    [message] = dataset.prompt(problems[0])
    assert message.content == CAPITALS[0]["question"]  # no \boxed{} instruction on prose
    label = Reference(problem_id="fr", answer="Paris")
    assert dataset.grade("<think>Lyon? no.</think> paris.", label).correct
    assert dataset.grade("The capital is Paris.", label).status == "wrong"  # exact, nothing looser
    assert dataset.grade(None, label).status == "no_answer"
    assert dataset.grade("<think>never closed", label).status == "no_answer"


def test_a_free_form_file_runs_end_to_end_on_scripted_replies(tmp_path: Path, testtime_cli: Callable[..., Any]) -> None:
    data = write_jsonl(tmp_path / "capitals.jsonl", CAPITALS)
    out = tmp_path / "run"
    done = testtime_cli("run", "--bench", str(data), "--model", "fake:", "--n", "3", "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    assert "text (chosen from the data: prose answers" in done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["problems"] == 3 and summary["accuracy"]["mean"] == 0.0  # fake: echoes the question
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert all(r["selection"]["selector"] == "medoid" and r["prediction"] for r in records)
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert all(p["prediction"] and 0.0 <= p["confidence"] <= 1.0 for p in predictions)


def test_an_unlabelled_prose_file_is_answered_as_text_by_default(
    tmp_path: Path, testtime_cli: Callable[..., Any]
) -> None:
    """No `--bench-opt domain=text`: the requests go to the model as written, each gets a prediction (the reply
    chosen among whole replies), and the manifest says the data chose the domain."""
    asks = ["Write a haiku about autumn rain.", "Describe the sea in one sentence.", "Name a French painter."]
    data = write_jsonl(tmp_path / "prose.jsonl", [{"id": f"p{i}", "prompt": a} for i, a in enumerate(asks)])
    out = tmp_path / "run"
    done = testtime_cli("run", "--bench", str(data), "--model", "fake:", "--n", "3", "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    assert "text (chosen from the data: the problems ask for no math" in done.stderr
    benchmark = json.loads((out / "config.json").read_text())["benchmark"]
    assert (benchmark["domain"], benchmark["domain_from"]) == ("text", "data")
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == 3 and all(p["prediction"] for p in predictions)
    sent = (out / "blobs.jsonl").read_text()  # every text of the run: the prompts, as sent, among them
    assert json.dumps(INSTRUCTION)[1:-1] not in sent and all(json.dumps(a) in sent for a in asks)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs the local extra (torch)")
def test_a_free_form_file_runs_end_to_end_on_the_embedded_model(
    tmp_path: Path, testtime_cli: Callable[..., Any]
) -> None:
    data = write_jsonl(tmp_path / "capitals.jsonl", CAPITALS)
    out = tmp_path / "run"
    args = ("run", "--bench", str(data), "--n", "3", "--max-tokens", "16", "--temperature", "0.7", "--quiet")
    done = testtime_cli(*args, "--out", str(out), cwd=tmp_path, env={"HF_HUB_OFFLINE": "1"}, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    ledger = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    judged = sum(e.get("purpose") == "consistency" for e in ledger)  # a judgement where the replies differ
    assert summary["problems"] == 3 and summary["ledger"]["errors"] == 0
    assert summary["ledger"]["calls"] == 9 + judged and judged <= 3
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    for record in records:  # every problem answered with one of its own replies, chosen by the medoid
        assert record["selection"]["selector"] == "medoid"
        assert record["prediction"] in [c["answer"] for c in record["candidates"]]
        assert record["status"] in ("correct", "wrong")
    # the embedded model cannot judge its own replies (docs/own-data.md): each judged selection fell back, and
    # the run says so; nothing else is warned
    fell = summary["label_free"]["judge_fell_back"] or 0
    assert summary["accuracy"] is not None and fell == judged
    assert [w for w in summary["warnings"] if "judged selections fell back" not in w] == []
    assert any(f"{fell} of {judged} judged selections fell back" in w for w in summary["warnings"]) == (fell > 0)
