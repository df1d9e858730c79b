"""The manifest says what a run used: the sampling of every kind of call, checked against what went over the
wire to a real HTTP server; and the summary says what was not measured as null, never 0."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testtime.core.ledger import Ledger, LedgerEntry
from testtime.core.trace import read_trace
from testtime.evaluation.scoring import summarize
from testtime.models.mock_server import MockChatServer
from testtime.run.directory import RunDir

Cli = Callable[..., Any]
SENT = ("temperature", "top_p", "max_tokens")


def _sent_by_purpose(server: MockChatServer, out: Path) -> dict[str, set[tuple[Any, ...]]]:
    """Each kind of call (from the run's trace) → the sampling its requests carried on the wire."""
    lines, blobs = read_trace(out)
    purpose_of = {
        json.dumps([blobs[blob] for _, blob in line.messages]): line.purpose for line in lines if line.outcome == "paid"
    }
    sent: dict[str, set[tuple[Any, ...]]] = {}
    for body in server.bodies:
        purpose = purpose_of[json.dumps([m["content"] for m in body["messages"]])]
        sent.setdefault(purpose, set()).add(tuple(body[k] for k in SENT))
    return sent


@pytest.mark.parametrize(
    ("flags", "expected"),
    [([], (0.6, 1.0, 32768)), (["--temperature", "0.3", "--top-p", "0.9", "--max-tokens", "100"], (0.3, 0.9, 100))],
)
def test_the_manifest_records_what_each_kind_of_call_sent(
    testtime_cli: Cli, tmp_path: Path, flags: list[str], expected: tuple[Any, ...]
) -> None:
    out = tmp_path / "trt"
    with MockChatServer() as server:
        done = testtime_cli(
            "run", "--method", "trt", "-T", "2", "-K", "2", "--bench", "arith", "--limit", "2", "--model",
            "openai:mock", "--api-base", server.url, "--out", str(out), "--quiet", *flags,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        sent = _sent_by_purpose(server, out)
    manifest = RunDir(out).read_manifest()
    assert manifest.schema_version == 2 and manifest.effective is not None
    recorded = {kind: (p.temperature, p.top_p, p.max_tokens) for kind, p in manifest.effective.sampling.items()}
    assert set(recorded) == {"strategies", "solve", "reflect"} == set(sent)
    for kind, values in sent.items():
        assert values == {recorded[kind]}, kind  # every call of the kind sent what the manifest says
    assert set(recorded.values()) == {expected}
    assert manifest.run.temperature == (None if not flags else 0.3)  # as asked: null is "the default"
    assert manifest.effective.n is None and manifest.effective.problems == 2
    assert manifest.effective.planned_calls_per_problem == 1 + 2 * (2 + 1)


def test_majority_on_code_records_the_test_writing_calls(testtime_cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "code"
    done = testtime_cli(
        "run", "--method", "majority", "--bench", "pyfunc", "--limit", "1", "--n", "2", "--model", "fake:",
        "--out", str(out), "--quiet", "--sandbox", "docker",
    )  # fmt: skip
    if done.returncode == 2 and "sandbox" in done.stderr:
        pytest.skip(done.stderr.strip())
    manifest = RunDir(out).read_manifest()
    assert manifest.effective is not None and set(manifest.effective.sampling) == {"solve", "tests"}
    assert manifest.effective.n == 2 and manifest.method["selector"]["name"] == "execution"


def test_an_unknown_price_makes_the_cost_null_not_zero() -> None:
    ledger = Ledger()
    ledger.record(LedgerEntry(attempts=1, prompt_tokens=5, cost_usd=0.002))
    ledger.record(LedgerEntry(attempts=1, prompt_tokens=5, cost_usd=None))
    summary = summarize([], ledger.totals)
    assert summary.ledger.cost_usd is None and summary.ledger.known_cost_usd == pytest.approx(0.002)
    assert summary.accuracy is None  # no problem: nothing measured
    written = json.loads(summary.model_dump_json())
    assert written["ledger"]["cost_usd"] is None and written["accuracy"] is None
    assert written["ledger"]["train_flops"] is None  # no training step: not 0 FLOPs


def test_a_summary_uses_one_name_per_metric() -> None:
    from testtime.core.results import ResultRecord

    records = [
        ResultRecord.model_validate(
            {
                "problem_id": f"p{i}",
                "prediction": "1",
                "correct": i == 0,
                "graded_answer": "1",
                "status": "wrong",
                "candidates": [{"index": 0, "text": "", "answer": "1"}],
                "sample_correct": [i == 0],
                "cluster_of": [0],
                "cluster_correct": [i == 0],
            }
        )
        for i in range(2)
    ]
    written = json.loads(summarize(records, Ledger().totals).model_dump_json())
    assert {"accuracy", "pass@1", "maj@k"} <= set(written) and "pass@1_avg" not in written
    assert written["accuracy"]["interval"] == "wilson" and written["schema_version"] == 2


def test_rsa_runs_at_its_papers_sampling_by_default(testtime_cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "rsa"
    with MockChatServer() as server:
        done = testtime_cli(
            "run", "--method", "rsa", "--bench", "arith", "--limit", "1", "--method-opt", "population=2",
            "--method-opt", "aggregate=2", "--method-opt", "steps=2", "--model", "openai:mock", "--api-base",
            server.url, "--out", str(out), "--quiet",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        sent = _sent_by_purpose(server, out)
    manifest = RunDir(out).read_manifest()
    assert manifest.effective is not None
    recorded = {kind: (p.temperature, p.top_p, p.max_tokens) for kind, p in manifest.effective.sampling.items()}
    assert set(sent) == set(recorded) == {"solve", "aggregate"}
    assert all(values == {(1.0, 1.0, 8192)} for values in sent.values()) and set(recorded.values()) == {
        (1.0, 1.0, 8192)
    }


def test_truncation_counts_every_kind_of_call(testtime_cli: Cli, tmp_path: Path) -> None:
    """Every solver answers within the limit; every reflection is cut. The final round's samples alone would
    say 0%: the run must say 2 of its 7 calls, and warn."""

    def reply(messages: list[dict[str, Any]]) -> str:
        if "You are improving a solver" in messages[-1]["content"]:
            return "Let me think about every attempt in turn, " * 10 + '{"insights": []}'
        return "It is \\boxed{4}"

    out = tmp_path / "trt"
    with MockChatServer(reply=reply) as server:
        done = testtime_cli(
            "run", "--method", "trt", "-T", "2", "-K", "2", "--bench", "arith", "--limit", "1", "--max-tokens", "20",
            "--model", "openai:mock", "--api-base", server.url, "--out", str(out),
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["ledger"]["calls"] == 7 and summary["ledger"]["truncated_calls"] == 2
    assert summary["truncation_rate"] == pytest.approx(2 / 7)
    assert "29% of model calls stopped at their token cap" in done.stdout + done.stderr
    assert "Raise --max-tokens" in done.stdout + done.stderr
