"""Shared fixtures: the development data folder beside the checkout, and small builders."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    if not (SHARED_DATA / "aime24.jsonl").is_file():
        pytest.skip(f"development data not found at {SHARED_DATA}")
    return SHARED_DATA


def _run_cli(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "testtime.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def testtime_cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run `testtime ARGS...` as a user would: a fresh process, output captured."""
    return _run_cli
