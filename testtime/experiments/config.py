"""The run configuration: what `testtime run` was asked, saved as config.json so a run can be rebuilt."""

from __future__ import annotations

import platform
from importlib import metadata
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from testtime.core.errors import UserError, first_error

_VERSIONED = ("testtime", "pydantic", "torch", "transformers", "litellm", "vllm", "trl", "math-verify", "sympy")


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    method: str
    bench: str
    model: str
    n: int | None = Field(default=None, ge=1)
    limit: int | None = Field(default=None, ge=1)
    seed: int = 0
    temperature: float = Field(default=0.7, ge=0.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(default=512, ge=1)
    concurrency: int = Field(default=16, ge=1)
    data_dir: str | None = None
    bench_options: dict[str, str] = {}
    method_options: dict[str, str] = {}
    api_base: str | None = None
    api_key_env: str | None = None
    sandbox: str = "auto"
    max_cost: float | None = Field(default=None, gt=0)  # USD; stops cleanly, resumable with a larger budget
    max_tokens_total: int | None = Field(default=None, gt=0)

    @classmethod
    def from_saved(cls, saved: dict[str, Any], source: str) -> RunConfig:
        try:
            return cls.model_validate(saved.get("run"))
        except ValidationError as exc:
            where, message = first_error(exc)
            raise UserError(f"malformed config in {source}: {where or 'run'}: {message}") from None


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def parse_options(pairs: list[str], flag: str) -> dict[str, str]:
    """`["digits=2", "ops=+-"]` → dict; a pair without '=' is a user error."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UserError(f"{flag} expects KEY=VALUE, got '{pair}'")
        options[key.strip()] = value.strip()
    return options
