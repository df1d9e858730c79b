"""Started sandboxes per available backend; a backend that cannot run here is skipped, never faked."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from testtime.sandbox import Sandbox, SandboxError
from testtime.sandbox.choose import open_sandbox
from testtime.sandbox.probes import plant_secret


def _started(name: str, **options: object) -> Sandbox:
    plant_secret()  # before any worker starts, so a leaking environment would carry it
    try:
        return open_sandbox(name, **options)
    except SandboxError as exc:
        pytest.skip(f"{name} unavailable here: {exc}")


@pytest.fixture(scope="module", params=["docker", "bwrap"])
def backend(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    with _started(request.param) as sandbox:
        yield sandbox


@pytest.fixture(scope="module", params=["docker", "bwrap"])
def solo(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    """A pool of one worker: consecutive jobs meet the same sandbox, so one job can try to poison the next."""
    with _started(request.param, pool_size=1) as sandbox:
        yield sandbox
