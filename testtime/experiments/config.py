"""The run configuration: what `testtime run` was asked, saved as config.json so a run can be rebuilt."""

from __future__ import annotations

import platform
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from testtime.core.errors import UserError, first_error
from testtime.core.records import SamplingParams

_VERSIONED = ("testtime", "pydantic", "torch", "transformers", "litellm", "vllm", "trl", "math-verify", "sympy")


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    method: str
    bench: str
    model: str
    n: int | None = Field(default=None, ge=1)
    limit: int | None = Field(default=None, ge=1)
    seed: int = 0
    temperature: float | None = Field(default=None, ge=0.0)  # None: the default below, unless the method decides
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    max_tokens: int | None = Field(default=None, ge=1)
    concurrency: int = Field(default=16, ge=1)
    data_dir: str | None = None
    bench_options: dict[str, str] = {}
    method_options: dict[str, Any] = {}
    api_base: list[str] = []  # several: a fleet; calls spread over the servers by load
    api_key_env: str | None = None
    sandbox: str = "auto"
    request_timeout: float = Field(default=600.0, gt=0)  # seconds per attempt; a reasoning call may take minutes
    max_cost: float | None = Field(default=None, gt=0)  # USD; stops cleanly, resumable with a larger budget
    max_tokens_total: int | None = Field(default=None, gt=0)

    @field_validator("api_base", mode="before")
    @classmethod
    def _bases(cls, value: Any) -> Any:
        return [] if value is None else [value] if isinstance(value, str) else value  # configs before fleets

    @field_validator("api_base")
    @classmethod
    def _urls(cls, bases: list[str]) -> list[str]:
        for base in bases:
            if not base.startswith(("http://", "https://")):
                raise ValueError(f"'{base}' is not an http(s) URL")
        return bases

    def sampling(self) -> SamplingParams:
        """The sampling parameters a method starts from (`--temperature` and friends, else the defaults)."""
        defaults = SamplingParams()
        return SamplingParams(
            temperature=defaults.temperature if self.temperature is None else self.temperature,
            top_p=defaults.top_p if self.top_p is None else self.top_p,
            max_tokens=defaults.max_tokens if self.max_tokens is None else self.max_tokens,
            seed=self.seed,
        )

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


def method_options(
    method: str, flags: list[str], pairs: list[str], selector: str | None, selector_pairs: list[str]
) -> dict[str, Any]:
    """A method's options from its own flags, `--method-opt` pairs and `--selector`/`--selector-opt`."""
    from testtime.experiments.flags import parse_flags
    from testtime.methods import METHODS, load_methods

    load_methods()
    chosen = METHODS.get(method)
    others = {name: METHODS.get(name).Options for name in METHODS.names() if name != method}  # type: ignore[attr-defined]
    options: dict[str, Any] = {**parse_options(pairs, "--method-opt")}
    options.update(parse_flags(flags, method, chosen.Options, others))  # type: ignore[attr-defined]
    if selector is not None or selector_pairs:
        if "selector" not in chosen.Options.model_fields:  # type: ignore[attr-defined]
            raise UserError(f"--method {method} selects nothing: --selector and --selector-opt do not apply")
        if selector is not None:
            options["selector"] = selector
        if selector_pairs:
            options["selector_options"] = parse_options(selector_pairs, "--selector-opt")
    return options


def api_bases(values: list[str] | None) -> list[str]:
    """`--api-base` values: URLs, or files that list one URL a line (blank lines and `#` comments skipped)."""
    bases: list[str] = []
    for value in values or []:
        if value.startswith(("http://", "https://")):
            bases.append(value)
            continue
        path = Path(value)
        if not path.is_file():
            raise UserError(f"--api-base {value}: neither an http(s) URL nor a file of URLs")
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"--api-base {value}: cannot read it ({exc})") from None
        listed = [line.split("#", 1)[0].strip() for line in lines]
        bases.extend(line for line in listed if line)
        if not any(listed):
            raise UserError(f"--api-base {value}: the file lists no URL")
    return bases
