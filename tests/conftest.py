"""Shared fixtures: the development data folder beside the checkout, and small builders."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    if not (SHARED_DATA / "aime24.jsonl").is_file():
        pytest.skip(f"development data not found at {SHARED_DATA}")
    return SHARED_DATA
