"""The plain install (`pip install testtime`, no extras) as a user gets it: no torch, API runs work against a real
HTTP server, and each feature that needs an extra stops with one line naming the pip command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("plain") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(ROOT)], capture_output=True, text=True
    )
    if installed.returncode != 0 and "Could not find a version" in installed.stderr:
        pytest.skip(f"no package index: {installed.stderr[-300:]}")
    assert installed.returncode == 0, installed.stderr[-3000:]
    return venv / "bin"


@pytest.fixture(scope="module")
def server(plain: Path) -> Iterator[str]:
    process = subprocess.Popen(
        [str(plain / "python"), "-m", "testtime.models.mock_server"], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    try:
        yield process.stdout.readline().strip()
    finally:
        process.kill()


def _testtime(plain: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "TESTTIME_DATA_DIR"}  # so the hub is the data source
    return subprocess.run(
        [str(plain / "testtime"), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


def test_the_plain_install_has_no_torch(plain: Path) -> None:
    found = subprocess.run(
        [
            str(plain / "python"),
            "-c",
            "import importlib.util as u; print([m for m in ('torch', 'transformers', "
            "'trl', 'vllm', 'datasets') if u.find_spec(m)])",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert found.stdout.strip() == "[]"


@pytest.mark.parametrize("provider", ["openai:mock", "litellm:openai/mock"])
def test_an_api_run_works_without_extras(plain: Path, server: str, provider: str, tmp_path: Path) -> None:
    done = _testtime(
        plain,
        *f"run --method majority --bench arith --limit 3 --n 4 --quiet --model {provider} --api-base {server}".split(),
        *("--out", str(tmp_path / "run")),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["problems"] == 3 and summary["error_rate"] == 0.0 and summary["ledger"]["calls"] == 12


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        ("run --method majority --bench arith --limit 1 --n 1 --model hf:smollm2-135m", "local"),
        ("run --method single --bench arith --limit 1", "local"),  # the embedded default model
        ("run --method ttrl --bench arith --limit 4 --model openai:mock --api-base http://127.0.0.1:9/v1", "train"),
        ("run --method single --bench aime24 --limit 1 --model openai:mock --api-base http://127.0.0.1:9/v1", "hub"),
    ],
)
def test_a_missing_extra_is_one_line_naming_the_pip_command(plain: Path, tmp_path: Path, args: str, extra: str) -> None:
    done = _testtime(plain, *args.split(), "--out", str(tmp_path / "run"), cwd=tmp_path)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert f"pip install 'testtime[{extra}]'" in done.stderr, done.stderr[-2000:]
