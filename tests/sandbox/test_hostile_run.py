"""A code run whose model writes hostile programs still finishes, with a verdict for every program, and
resumes: a forged or garbled report, a flood on the report channel, a deep tree left in /tmp, a stopped
zygote. Through the real `run` path, on each backend."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testtime.sandbox.probe_programs import DEEP_TREE, FLOOD_REPORT, FORGED_REPORT, GARBAGE_REPORT, STOP_ZYGOTE

ATTACKS = [FORGED_REPORT, GARBAGE_REPORT, FLOOD_REPORT, DEEP_TREE, STOP_ZYGOTE]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_a_run_of_hostile_programs_finishes_and_resumes(
    backend: str, testtime_cli: Callable[..., Any], tmp_path: Path
) -> None:
    responses = tmp_path / "programs.json"
    responses.write_text(json.dumps([f"```python\n{program}\n```" for program in ATTACKS]))
    out = tmp_path / "run"
    args = ["run", "--method", "majority", "--bench", "pyfunc", "--bench-opt", "level=1", "--limit", "3", "--n", "5"]
    args += ["--model", f"fake:file:{responses}", "--sandbox", backend, "--quiet", "--out", str(out)]
    done = testtime_cli(*args, timeout=600)
    if done.returncode == 2 and "unavailable" in done.stderr:
        pytest.skip(done.stderr.strip())
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 3 and all(len(r["sample_status"]) == 5 for r in records)  # a verdict for each program
    assert not any(r["correct"] for r in records)  # none of the attacks solves a task by attacking
    again = testtime_cli("run", "--resume", str(out), "--quiet", timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
