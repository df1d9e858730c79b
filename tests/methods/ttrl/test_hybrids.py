"""Beyond the seeds, end to end on the scripted tiny model (the mechanics; docs/methods pages measure them): TTRL
with reflective pseudo-labels (`label=reflect`) records the majority's label and the reflection's per prompt, and
each reflection is a `reflect` call on the ledger; TTRL with TRT's knowledge (`knowledge=trt`) records the
reflections asked and parsed and the lessons entered per step, its summary carries TRT's knowledge line, and the
evaluation prompts never carry a lesson."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from testtime.core.ledger import read_entries
from testtime.core.results import read_steps

TINY_TTRL = ["run", "--method", "ttrl", "--preset", "cpu", "--bench", "arith", "--bench-opt", "size=4", "--steps", "1",
             "--n", "2", "--method-opt", "prompts_per_step=4", "--method-opt", "mini_batch_prompts=4",
             "--method-opt", "n_vote=4", "--method-opt", "n_train=2"]  # fmt: skip


def _ttrl(tmp_path: Path, model: str, *options: str) -> Path:
    out = tmp_path / "run"
    args = [*TINY_TTRL, "--model", model, "--out", str(out), *(x for o in options for x in ("--method-opt", o))]
    log = tmp_path / "stderr.log"
    with log.open("w") as stderr:
        done = subprocess.run([sys.executable, "-m", "testtime.cli", *args], stdout=subprocess.PIPE, stderr=stderr,
                              text=True, timeout=1100)  # fmt: skip
    assert done.returncode == 0, log.read_text()[-3000:]
    assert "Traceback" not in log.read_text()
    return out


@pytest.mark.slow
def test_reflective_labels_record_both_labels_per_prompt(tmp_path: Path, scripted_model: str) -> None:
    out = _ttrl(tmp_path, scripted_model, "label=reflect")
    votes = [v for step in read_steps(out / "ttrl" / "steps.jsonl") for v in step.votes]
    assert len(votes) == 4
    for vote in votes:
        assert vote.label_fell_back is not None and vote.label_differs is not None
        assert vote.majority_label is not None or vote.label_fell_back
        if not vote.label_differs:
            assert vote.label == vote.majority_label
    reflected = [e for e in read_entries(out / "ledger.jsonl") if e.purpose == "reflect"]
    split = [v for v in votes if v.classes > 1]
    assert len(reflected) == len(split)  # one greedy reflection where the vote had two classes to choose from
    config = json.loads((out / "config.json").read_text())
    assert config["method"]["label"] == "reflect" and config["effective"]["sampling"]["reflect"]["temperature"] == 0


@pytest.mark.slow
def test_trt_knowledge_in_ttrl_records_its_reflections_per_step(tmp_path: Path, scripted_model: str) -> None:
    out = _ttrl(tmp_path, scripted_model, "knowledge=trt")
    steps = read_steps(out / "ttrl" / "steps.jsonl")
    counted = [s.knowledge for s in steps if s.knowledge is not None]
    assert len(counted) == 1 and counted[0].asked >= 0 and counted[0].parsed <= counted[0].asked
    asked = [e for e in read_entries(out / "ledger.jsonl") if e.purpose == "knowledge"]
    assert len(asked) == counted[0].asked  # one reflection per prompt whose vote rejected a class
    summary = json.loads((out / "summary.json").read_text())
    health = summary["trt_knowledge"]
    assert health["reflections"] == counted[0].asked and health["lessons_entered"] == counted[0].entered
    empty = [w for w in summary["warnings"] if "knowledge list stayed empty" in w]
    assert bool(empty) == (health["lessons_entered"] == 0)
    assert all("TTRL's training without them" in w for w in empty)  # not TRT's wording: no rounds ran
    blobs = (out / "blobs.jsonl").read_text()
    assert "Lessons from earlier attempts" not in blobs  # no evaluation prompt carries a lesson


@pytest.mark.slow
def test_the_training_votes_extra_samples_are_drawn_only_for_unsettled_prompts(
    tmp_path: Path, scripted_model: str
) -> None:
    """--adaptive on transformers: the trained samples first, the vote judged on them, then one batch of
    vote-only samples for the prompts they left unsettled; a settled prompt draws none."""
    out = tmp_path / "adaptive"
    out.mkdir()
    run = _ttrl(out, scripted_model, "n_vote=8", "n_train=4")  # (a later option wins: 8 votes, 4 trained)
    fixed_lines = [e for e in read_entries(run / "ledger.jsonl") if e.purpose == "ttrl_vote"]
    assert len(fixed_lines) == 4 * 4  # every prompt's 4 vote-only samples
    other = tmp_path / "adaptive-run"
    other.mkdir()
    adaptive = _ttrl_adaptive(other, scripted_model)
    lines = [e for e in read_entries(adaptive / "ledger.jsonl") if e.purpose == "ttrl_vote"]
    assert len(lines) % 4 == 0 and len(lines) < len(fixed_lines)  # whole groups of 4, some prompts settled
    every_vote_trained = [*TINY_TTRL, "--model", scripted_model, "--adaptive", "--method-opt", "n_vote=2"]
    refused = subprocess.run([sys.executable, "-m", "testtime.cli", *every_vote_trained, "--out",
                              str(tmp_path / "refused")], capture_output=True, text=True)  # fmt: skip
    assert refused.returncode == 2 and "nothing can be skipped" in refused.stderr


def _ttrl_adaptive(folder: Path, model: str) -> Path:
    out = folder / "run"
    options = ("n_vote=8", "n_train=4")
    args = [*TINY_TTRL, "--model", model, "--adaptive", "--out", str(out),
            *(x for o in options for x in ("--method-opt", o))]  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "testtime.cli", *args], capture_output=True, text=True, timeout=1100)
    assert done.returncode == 0, done.stderr[-3000:]
    return out
