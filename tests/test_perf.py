"""Every benchmark in `perf/` still runs: each at its `--smoke` size, so none can rot unnoticed (a README
figure comes from a script that still runs). The figures themselves live in the scripts' tables, never here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PERF = Path(__file__).resolve().parents[1] / "perf"
SCRIPTS = sorted(p.name for p in PERF.glob("*.py"))
NEEDS = {  # what a script needs beyond the base install; without it, it is skipped here (CI has all of it)
    "adaptive.py": "torch",
    "adaptive_ttrl.py": "trl",
    "hf_prefill.py": "torch",
    "ttrl_step.py": "trl",
    "stream.py": "trl",
    "serve_learns.py": "trl",
    "serve_safe.py": "trl",
    "sandbox.py": "docker",
    "selection.py": "docker",
    "fleet.py": "vllm",
}


TAKES_A_MODEL = ("adaptive.py", "adaptive_ttrl.py", "hf_prefill.py", "ttrl_step.py", "stream.py", "serve_learns.py",
                 "serve_safe.py")  # fmt: skip


def test_every_script_takes_smoke() -> None:
    assert SCRIPTS, "no perf scripts found"
    for name in SCRIPTS:
        assert "--smoke" in (PERF / name).read_text(), f"{name} has no --smoke size"


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.extras) if NEEDS.get(n) == "vllm" else n for n in SCRIPTS]
)
def test_script_runs_at_its_smoke_size(name: str, shared_data: Path, request: pytest.FixtureRequest) -> None:
    need = NEEDS.get(name)
    if need in ("torch", "trl"):
        pytest.importorskip(need)
    if need == "vllm":
        from testtime.models.vllm_server import vllm_python

        if vllm_python() is None:
            pytest.skip("no vLLM: bash scripts/install --vllm")
    if need == "docker":
        from testtime.sandbox import SandboxError
        from testtime.sandbox.choose import open_sandbox

        try:
            open_sandbox("docker").close()
        except SandboxError as exc:
            pytest.skip(f"no Docker sandbox: {exc}")
    args = [sys.executable, str(PERF / name), "--smoke"]
    if name == "grading.py":
        args += ["--data-dir", str(shared_data)]
    if name in TAKES_A_MODEL:  # the smoke size proves the script runs: the tiny scripted model will do
        args += ["--model", request.getfixturevalue("scripted_model").removeprefix("hf:")]
    done = subprocess.run(args, capture_output=True, text=True, timeout=850)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), f"{name} printed no table"
