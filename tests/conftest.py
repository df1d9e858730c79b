"""Shared fixtures: the development data folder beside the checkout, and small builders."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from testtime.sandbox import Sandbox

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


def _interrupt_cli(
    *args: str, when: Callable[[], bool], sig: int, cwd: Path, patience: float = 60
) -> subprocess.CompletedProcess[str]:
    """Start `testtime ARGS...`, wait until `when()` holds (at most `patience` seconds), send `sig`, collect the
    outcome."""
    process = subprocess.Popen(
        [sys.executable, "-m", "testtime.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        # A shell's background job (`.ci/run &`, nohup) starts with SIGINT ignored, and Python then installs
        # no KeyboardInterrupt handler: give the child the default disposition, as a terminal would.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + patience
    while time.time() < deadline and not when():
        time.sleep(0.02)
    process.send_signal(sig)
    stdout, stderr = process.communicate(timeout=60)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@pytest.fixture
def interrupt_cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    return _interrupt_cli


@pytest.fixture
def testtime_process() -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run `testtime ARGS...` as a user would: a fresh process, output captured. For what a process boundary
    proves: registries as a fresh process fills them (plugins), the terminal's width, signals, exit by crash."""
    return _run_cli


@pytest.fixture
def testtime_cli(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run `testtime ARGS...` in this process (the command's `main`, its exit status, its stdout and stderr):
    the same code path as the installed command without paying Python's and the libraries' start again."""

    def run(
        *args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float | None = None
    ) -> subprocess.CompletedProcess[str]:
        from testtime.cli import main

        with monkeypatch.context() as patch:
            if cwd is not None:
                patch.chdir(cwd)
            for name, value in (env or {}).items():
                patch.setenv(name, value)
            capsys.readouterr()
            try:
                main(list(args))
                status = 0
            except SystemExit as exc:
                status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            captured = capsys.readouterr()
        return subprocess.CompletedProcess(["testtime", *args], status, captured.out, captured.err)

    return run


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries back off in milliseconds, not seconds (the count, the ledger lines and the errors are unchanged):
    for tests that make a run fail on purpose in this process."""
    from testtime.core.call_policy import RetryPolicy

    original = RetryPolicy.delay
    monkeypatch.setattr(RetryPolicy, "delay", lambda self, attempt, after: original(self, attempt, after) / 100)


@pytest.fixture(scope="session")
def scripted_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """`hf:<folder>` of the tiny scripted model (`tests/tiny_model.py`): TTRL's mechanics in seconds."""
    pytest.importorskip("torch")
    from tests.tiny_model import build_scripted_model

    return f"hf:{build_scripted_model(tmp_path_factory.mktemp('scripted-model'))}"


@pytest.fixture(scope="session")
def scripted_coder(tmp_path_factory: pytest.TempPathFactory) -> str:
    """`hf:<folder>` of the tiny scripted model's code variant: a fenced `print(1)` or `print(2)`."""
    pytest.importorskip("torch")
    from tests.tiny_model import build_scripted_model

    return f"hf:{build_scripted_model(tmp_path_factory.mktemp('scripted-coder'), 'code')}"


@pytest.fixture(scope="session")
def random_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of a tiny random Llama (`tests/tiny_model.py`): for tests that compare two computations of
    one model, which any model proves in milliseconds."""
    pytest.importorskip("torch")
    from tests.tiny_model import build_random_model

    return build_random_model(tmp_path_factory.mktemp("random-model"))


@pytest.fixture(scope="module")
def open_sandbox_or_skip() -> Iterator[Sandbox]:
    """A started sandbox (Docker, else bubblewrap); tests that need one skip where neither can run."""
    from testtime.sandbox import SandboxError
    from testtime.sandbox.choose import open_sandbox

    try:
        box = open_sandbox("auto")
    except SandboxError as exc:
        pytest.skip(f"no sandbox: {exc}")
    with box:
        yield box


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The reproductions (the TTRL miniature, about 10 minutes; the majority page's table) run only when asked
    for: `-m miniature` (CI's second stage).
    Files holding slow tests go first, so parallel workers (`scripts/test`) start the long ones early and fill
    the end with short ones, rather than finishing on one long file while the others wait."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow_files)  # stable: the order within a file is kept
    if "miniature" in (config.getoption("markexpr") or ""):
        return
    chosen = [item for item in items if item.get_closest_marker("miniature") is None]
    if len(chosen) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in chosen])
        items[:] = chosen
