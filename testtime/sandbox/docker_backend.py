"""`docker`: a warm pool of locked-down containers, each running the resident harness as PID 1.

Jobs travel over a unix socket. The host listens on it in a private folder, bound read-only into the
container as its only host path; the harness connects once, and the socket file is removed at once, so no
later process can connect and nothing in the container can write to the host. A misbehaving container is
killed and replaced: killing a client never stops a container, so `destroy` kills the container itself.
Containers and folders carry their owner's identity (`owner.py`); a starting pool reaps those of dead owners.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from typing import Any

from testtime.sandbox import SANDBOXES, SCRATCH_MB, SandboxError
from testtime.sandbox.owner import CONTAINER_LABEL, FOLDER_PREFIX, OWNER_LABEL, local_tag, owner_id, reap
from testtime.sandbox.pool import HARNESS_SOURCE, PooledSandbox, Worker
from testtime.sandbox.syscall_filter import docker_profile

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
        super().__init__()
        self.connection: socket.socket | None = None
        self.folder = tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{local_tag()}-")
        os.chmod(self.folder, 0o755)  # uid 65534 must reach the socket; the mount is read-only anyway
        self.socket_path = os.path.join(self.folder, "harness.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.socket_path)
        os.chmod(self.socket_path, 0o777)  # connecting needs write permission on the socket file
        self.listener.listen(1)
        self.container = client.containers.run(
            image,
            ["python3", "-c", HARNESS_SOURCE, "--connect", f"{SOCKET_DIR}/harness.sock"],
            detach=True,
            network_mode="none",
            read_only=True,
            tmpfs={"/tmp": f"size={SCRATCH_MB}m,mode=1777"},
            shm_size=f"{SCRATCH_MB}m",
            mem_limit=f"{memory_mb}m",
            memswap_limit=f"{memory_mb}m",
            nano_cpus=int(cpus * 1e9),
            pids_limit=pids,
            cap_drop=["ALL"],
            # The engine's default filter allows io_uring (20.10): ours is that profile with it refused
            security_opt=["no-new-privileges", f"seccomp={docker_profile()}"],
            user="65534:65534",
            environment={},
            volumes={self.folder: {"bind": SOCKET_DIR, "mode": "ro"}},
            working_dir="/tmp",
            labels={CONTAINER_LABEL: "harness", OWNER_LABEL: owner_id()},
        )

    def _accept(self) -> socket.socket:
        """The harness's one connection; then the socket file goes, so nothing else can connect."""
        deadline = time.monotonic() + 30
        self.listener.settimeout(0.05)
        while time.monotonic() < deadline:
            try:
                connection, _ = self.listener.accept()
                break
            except TimeoutError:
                self.container.reload()
                if self.container.status == "exited":
                    logs = self.container.logs().decode(errors="replace")[-500:]
                    self.destroy()
                    raise SandboxError(f"sandbox container exited at start: {logs}") from None
        else:
            self.destroy()
            raise SandboxError("sandbox container did not start its harness within 30 s")
        self.listener.close()
        os.unlink(self.socket_path)
        connection.setblocking(True)
        return connection

    @property
    def read_fd(self) -> int:  # type: ignore[override]
        if self.connection is None:
            self.connection = self._accept()  # lazily: a pool starts its containers in parallel
        return self.connection.fileno()

    @property
    def write_fd(self) -> int:  # type: ignore[override]
        return self.read_fd

    def destroy(self) -> None:
        for closable in (self.connection, self.listener):
            if closable is not None:
                closable.close()
        try:
            self.container.remove(force=True)  # SIGKILL to the container, then removal
        except Exception:  # noqa: BLE001 - already gone is fine; a leftover is reaped by the next pool
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
            reap(self._client)  # containers and folders of runs that were killed
        super().start()

    def _spawn(self) -> Worker:
        return _ContainerWorker(self._client, self.image, self.memory_mb, self.pids, self.cpus)
