"""A started sandbox per available backend; a backend that cannot run here is skipped, never faked."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testtime.sandbox import Sandbox, SandboxError
from testtime.sandbox.choose import open_sandbox
from testtime.sandbox.probes import plant_secret


@pytest.fixture(scope="module", params=["docker", "bwrap"])
def backend(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    plant_secret()  # before any worker starts, so a leaking environment would carry it
    try:
        sandbox = open_sandbox(request.param)
    except SandboxError as exc:
        pytest.skip(f"{request.param} unavailable here: {exc}")
    with sandbox:
        yield sandbox
