"""Pick a sandbox backend by name; `auto` prefers Docker, then bubblewrap, and never the bare host."""

from __future__ import annotations

from typing import Any

from testtime.sandbox import SANDBOXES, Sandbox, SandboxError

CHOICES = ("auto", "docker", "bwrap")


def open_sandbox(name: str = "auto", **options: Any) -> Sandbox:
    """A started sandbox. `auto`: Docker where an engine and the image are ready, else bubblewrap."""
    if name != "auto":
        sandbox = SANDBOXES.create(name, **options)
        sandbox.start()
        return sandbox
    reasons = []
    for candidate in ("docker", "bwrap"):
        sandbox = SANDBOXES.create(candidate, **options)
        try:
            sandbox.start()
            return sandbox
        except SandboxError as exc:
            reasons.append(f"{candidate}: {exc}")
    raise SandboxError("no sandbox can run here, and code never runs on the bare host. " + " | ".join(reasons))
