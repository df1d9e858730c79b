"""`docker`: a warm pool of locked-down containers, each running the resident harness as PID 1.

Jobs travel over a unix socket in a private host directory bound into the container (the only host path
inside), so a job costs no Docker API call. A misbehaving container is killed and replaced: killing a
client never stops a container, so `destroy` kills the container itself.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from typing import Any

from testtime.sandbox import SANDBOXES, SandboxError
from testtime.sandbox.pool import HARNESS_SOURCE, PooledSandbox, Worker

DEFAULT_IMAGE = "testtime-sandbox:py311"
SOCKET_DIR = "/run/testtime"


def docker_client() -> Any:
    """A client whose engine answers, or SandboxError saying how to get one."""
    try:
        import docker

        client = docker.from_env(timeout=30)
        client.ping()
        return client
    except Exception as exc:  # noqa: BLE001 - every failure here means "no usable engine"
        raise SandboxError(
            f"no Docker engine answers ({type(exc).__name__}); install one (apt-get install docker.io), start "
            "dockerd, set DOCKER_HOST if its socket is elsewhere, or use --sandbox bwrap"
        ) from None


class _ContainerWorker(Worker):
    def __init__(self, client: Any, image: str, memory_mb: int, pids: int, cpus: float) -> None:
        self.folder = tempfile.mkdtemp(prefix="testtime-sandbox-")
        os.chmod(self.folder, 0o777)  # the harness runs as uid 65534 and creates its socket here
        self.container = client.containers.run(
            image,
            ["python3", "-c", HARNESS_SOURCE, "--socket", f"{SOCKET_DIR}/harness.sock"],
            detach=True,
            network_mode="none",
            read_only=True,
            tmpfs={"/tmp": "size=64m,mode=1777"},
            mem_limit=f"{memory_mb}m",
            memswap_limit=f"{memory_mb}m",
            nano_cpus=int(cpus * 1e9),
            pids_limit=pids,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            user="65534:65534",
            environment={},
            volumes={self.folder: {"bind": SOCKET_DIR, "mode": "rw"}},
            working_dir="/tmp",
            labels={"testtime.sandbox": "harness"},
        )
        self.sock = self._connect(os.path.join(self.folder, "harness.sock"))
        self.reader = self.sock.makefile("r", encoding="utf-8")

    def _connect(self, path: str) -> socket.socket:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if os.path.exists(path):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.connect(path)
                    return sock
                except OSError:
                    sock.close()
            self.container.reload()
            if self.container.status == "exited":
                logs = self.container.logs().decode(errors="replace")[-500:]
                self.destroy()
                raise SandboxError(f"sandbox container exited at start: {logs}")
            time.sleep(0.01)
        self.destroy()
        raise SandboxError("sandbox container did not start its harness within 30 s")

    def send(self, line: str) -> None:
        self.sock.sendall(line.encode() + b"\n")

    def receive(self, timeout_s: float) -> str | None:
        self.sock.settimeout(timeout_s)
        try:
            line = self.reader.readline()
        except TimeoutError:
            return None
        return line or None

    def destroy(self) -> None:
        for close in (getattr(self, "reader", None), getattr(self, "sock", None)):
            if close is not None:
                close.close()
        try:
            self.container.remove(force=True)  # SIGKILL to the container, then removal
        except Exception:  # noqa: BLE001 - already gone is fine; a leftover is listed by `sandbox check`
            pass
        shutil.rmtree(self.folder, ignore_errors=True)


@SANDBOXES.register("docker", help="warm pool of locked-down containers (needs dockerd + `testtime sandbox build`)")
class DockerSandbox(PooledSandbox):
    name = "docker"

    def __init__(
        self, image: str = DEFAULT_IMAGE, pool_size: int = 2, memory_mb: int = 1536, pids: int = 64, cpus: float = 1.0
    ) -> None:
        super().__init__(pool_size)
        self.image, self.memory_mb, self.pids, self.cpus = image, memory_mb, pids, cpus
        self._client: Any = None

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "image": self.image,
            "memory_mb": self.memory_mb,
            "pids": self.pids,
            "cpus": self.cpus,
        }

    def start(self) -> None:
        if self._client is None:
            self._client = docker_client()
            try:
                self._client.images.get(self.image)
            except Exception:  # noqa: BLE001 - ImageNotFound or an engine error: same advice
                raise SandboxError(f"sandbox image {self.image} is missing: run `testtime sandbox build`") from None
        super().start()

    def _spawn(self) -> Worker:
        return _ContainerWorker(self._client, self.image, self.memory_mb, self.pids, self.cpus)
