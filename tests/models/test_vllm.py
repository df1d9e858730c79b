"""vLLM for real, on CPU: `vllm serve` of the embedded model as an OpenAI-compatible server that majority and
TRT run through, the `vllm:` backend end to end (a server started and stopped by the run, and the offline
engine in vLLM's own environment). Skipped where no vLLM environment exists (`bash scripts/install --vllm`);
CI builds one, so there these run."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from testtime.core.ledger import read_entries
from testtime.models.hf import embedded_model_dir
from testtime.models.vllm_server import VLLMServer, vllm_python

pytestmark = [pytest.mark.slow, pytest.mark.extras]
ARITH = "--bench arith --bench-opt digits=2 --quiet".split()
MAJORITY_VLLM = "--method majority --limit 2 --n 4 --model vllm:smollm2-135m".split()


@pytest.fixture(scope="module")
def python() -> str:
    found = vllm_python()
    if found is None:
        pytest.skip("no vLLM environment (bash scripts/install --vllm)")
    return found


@pytest.fixture(scope="module")
def served(python: str) -> Iterator[str]:
    with VLLMServer(str(embedded_model_dir("smollm2-135m")), "smollm2-135m", python=python) as server:
        yield server.url


def _ran(out: Path, done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["error_rate"] == 0.0 and summary["complete"]
    entries = [e for e in read_entries(out / "ledger.jsonl") if e.kind == "model_call" and not e.cached]
    assert entries and all(e.completion_tokens > 0 for e in entries)  # the server really generated
    return summary


def test_majority_runs_through_vllm_serve(served: str, tmp_path: Path, testtime_cli: Callable[..., Any]) -> None:
    out = tmp_path / "majority"
    done = testtime_cli(
        *"run --method majority --limit 4 --n 4 --model openai:smollm2-135m".split(),
        *ARITH,
        *("--api-base", served, "--out", str(out)),
        timeout=600,
    )
    summary = _ran(out, done)
    assert summary["ledger"]["calls"] == 16


def test_trt_runs_through_vllm_serve(served: str, tmp_path: Path, testtime_cli: Callable[..., Any]) -> None:
    out = tmp_path / "trt"
    done = testtime_cli(
        *"run --method trt --limit 2 -T 2 -K 2 --max-tokens 128 --model openai:smollm2-135m".split(),
        *ARITH,
        *("--api-base", served, "--out", str(out)),
        timeout=900,
    )
    _ran(out, done)
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [len(r["rounds"]) for r in records] == [2, 2]  # every round of both problems served by vLLM


def _servers() -> set[int]:
    """The vLLM servers this process started (not the machine's: another test may run one beside this)."""
    import psutil

    found = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if "vllm.entrypoints.openai.api_server" in " ".join(child.cmdline()):
                found.add(child.pid)
        except psutil.Error:
            continue  # ended while we looked
    return found


def test_the_vllm_backend_serves_the_embedded_model_and_stops_its_server(
    python: str, tmp_path: Path, testtime_cli: Callable[..., Any]
) -> None:
    if python == sys.executable:
        pytest.skip("vLLM is importable here: the backend runs its engine in-process (the next test)")
    out = tmp_path / "served"
    before = _servers()  # the module's own server may be up
    done = testtime_cli(
        "run",
        *MAJORITY_VLLM,
        *ARITH,
        *("--out", str(out)),
        env={"TESTTIME_VLLM_PYTHON": python},
        timeout=900,
    )
    summary = _ran(out, done)
    assert summary["ledger"]["cost_usd"] == 0.0  # local compute is $0, known (unknown would be null)
    config = json.loads((out / "config.json").read_text())
    assert config["model"]["served_by"] == python
    assert _servers() <= before  # the run stopped the server it started


def test_the_vllm_backend_runs_the_offline_engine_in_vllms_environment(python: str, tmp_path: Path) -> None:
    out = tmp_path / "offline"
    done = subprocess.run(
        [python, "-m", "testtime.cli", "run", *MAJORITY_VLLM, *ARITH, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    _ran(out, done)
    config = json.loads((out / "config.json").read_text())
    assert "engine_args" in config["model"]  # the in-process engine, not a server
