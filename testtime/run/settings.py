"""What a run is asked to do: `RunSettings`, the one group of settings every command builds (`run`, `ablate`,
`ttrl controls`, the miniature, later `serve` and streams), saved in the manifest so a run can be rebuilt.

`None` means "the method's default": what a method actually used is recorded beside it, in the manifest's
`effective` block. `ResumeChanges` are the settings a resumed run may change (budgets, where the model is
served, how patiently): nothing that would change what a finished problem's answer means.
"""

from __future__ import annotations

import math
import platform
from dataclasses import fields
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from testtime.core.adaptive import FLAGS, Adaptive, AdaptiveRuleName
from testtime.core.errors import UserError, first_error
from testtime.core.seeds import SeedScheme
from testtime.methods.plan import RunBase

_ADAPTIVE = Adaptive()  # the rule's defaults, which the flattened settings take
_VERSIONED = ("testtime", "pydantic", "torch", "transformers", "litellm", "vllm", "trl", "verl", "math-verify", "sympy")


def _http_urls(bases: list[str]) -> list[str]:
    for base in bases:
        if not base.startswith(("http://", "https://")):
            raise ValueError(f"'{base}' is not an http(s) URL")
    return bases


class RunSettings(BaseModel):
    """Everything a run is asked to do (method, benchmark, model, sampling, budgets, where the model is
    served); saved in the manifest so the run can be resumed or rebuilt."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # inf would go upstream as invalid JSON

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
    bench_options: dict[str, Any] = {}
    method_options: dict[str, Any] = {}
    api_base: list[str] = []  # several: a fleet; calls spread over the servers by load
    api_key_env: str | None = None
    routing: Literal["affinity", "least-loaded"] | None = None  # a fleet: a problem on one server, or by load
    n_per_request: bool = False  # a problem's samples in one request where the server takes `n`
    sandbox: str = "auto"
    request_timeout: float = Field(default=600.0, gt=0)  # seconds per attempt; a reasoning call may take minutes
    max_cost: float | None = Field(default=None, gt=0)  # USD; stops cleanly, resumable with a larger budget
    max_tokens_total: int | None = Field(default=None, gt=0)
    # the ceiling a plan's model calls (a problem's × the problems) are checked against before anything is paid
    max_planned_calls: int = Field(default=1_000_000, ge=1)
    # USD per million prompt and completion tokens, for calls whose backend does not price them (--price)
    price: list[float] | None = None
    logprobs: int | None = Field(default=None, ge=0, le=20)  # token statistics per sample; k alternatives a token
    stream: bool = False  # problems arrive one at a time, each answered before anything is learned from it
    shuffle: bool = False  # a stream in a seeded shuffle of the dataset's order (--seed)
    shards: int | None = Field(default=None, ge=1)  # run --ray: this run is N shards, merged (run/ray_shards.py)
    shard: str | None = None  # "I/N": every N-th loaded problem from the I-th (run/shard.py); None: all of them
    # per-problem: each call's seed from (seed, problem, sample, kind); shared: from (seed, sample) alone, as
    # runs written before it (read so, their cache keys replay) and served requests (a client's seed redraws)
    seeds: SeedScheme = "per-problem"
    # --adaptive: a vote drawn in waves, stopped once settled; --n stays the cap. The rule's fields flattened
    # (`core/adaptive.FLAGS`), checked by the one model of them, `Adaptive`, which also holds their defaults.
    adaptive: bool = False
    adaptive_rule: AdaptiveRuleName = _ADAPTIVE.rule
    adaptive_threshold: float | None = _ADAPTIVE.threshold  # None: the rule's default (DEFAULT_THRESHOLDS)
    adaptive_min: int | None = _ADAPTIVE.min_samples  # None: the rule's (4; ac 1; esc its window)
    adaptive_wave: int | None = _ADAPTIVE.wave  # None: the rule's (2; ac 1; esc its window)

    _urls = field_validator("api_base")(_http_urls)
    _price = field_validator("price", mode="before")(lambda given: _price_pair(given))

    @field_validator("shard")
    @classmethod
    def _shard(cls, shard: str | None) -> str | None:
        from testtime.run.shard import parse_shard

        if shard is None:
            return None
        index, count = parse_shard(shard)
        return f"{index}/{count}"

    @model_validator(mode="after")
    def _adaptive_rule_holds(self) -> RunSettings:
        """The rule's fields as `Adaptive` checks them (a threshold that fits the rule, counts of 1 or more)."""
        try:
            self.rule()
        except ValidationError as exc:
            where, message = first_error(exc)
            flag = FLAGS.get(where or "threshold", where)  # the rule's own check is of its threshold
            raise ValueError(f"--{flag.replace('_', '-')}: {message}") from None
        return self

    def rule(self) -> Adaptive:
        """The early stop these settings describe, whether or not --adaptive asks for it."""
        return Adaptive(**{name: getattr(self, flag) for name, flag in FLAGS.items()})

    def stopping(self) -> Adaptive | None:
        """The early stop --adaptive asks for (None: every vote draws its full --n)."""
        return self.rule() if self.adaptive else None

    def base(self) -> RunBase:
        """What these settings bring to a method's plan: the model, --n, the sampling flags as given, the seed, and
        the early stop --adaptive asks for."""
        given = self.model_dump(include={f.name for f in fields(RunBase)} - {"adaptive"})
        return RunBase(**given, adaptive=self.stopping())


class ResumeChanges(BaseModel):
    """What `--resume` may change; `None` keeps the run's own value. Each change is recorded in the manifest."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # inf would go upstream as invalid JSON

    max_cost: float | None = Field(default=None, gt=0)
    max_tokens_total: int | None = Field(default=None, gt=0)
    price: list[float] | None = None
    api_base: list[str] | None = None  # a replacement server, or a different fleet
    api_key_env: str | None = None
    routing: Literal["affinity", "least-loaded"] | None = None
    request_timeout: float | None = Field(default=None, gt=0)
    concurrency: int | None = Field(default=None, ge=1)

    _urls = field_validator("api_base")(lambda bases: None if bases is None else _http_urls(bases))
    _price = field_validator("price", mode="before")(lambda given: _price_pair(given))

    def given(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump().items() if v is not None}


def _price_pair(given: Any) -> list[float] | None:
    """`--price PROMPT,COMPLETION` (USD per million tokens): two finite numbers ≥ 0."""
    if given is None:
        return None
    parts = given.split(",") if isinstance(given, str) else list(given)
    try:
        pair = [float(part) for part in parts]
    except (TypeError, ValueError):
        pair = []
    if len(pair) != 2 or not all(math.isfinite(x) and x >= 0 for x in pair):
        raise ValueError(f"expected PROMPT,COMPLETION in USD per million tokens (e.g. 0.15,0.60), got {given!r}")
    return pair


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def absolute_paths(given: dict[str, Any]) -> dict[str, Any]:
    """A data file named by `bench` and `data_dir` as absolute paths, so a resume from another folder finds the
    same data (a file that does not exist is left as given: loading names it)."""
    from testtime.benchmarks import is_dataset

    bench = given.get("bench")
    if bench is not None:
        bench = given["bench"] = str(bench)
        if is_dataset(bench) and not bench.startswith("hf:") and Path(bench).expanduser().exists():
            given["bench"] = str(Path(bench).expanduser().resolve())
    if given.get("data_dir"):
        given["data_dir"] = str(Path(given["data_dir"]).expanduser().resolve())
    return given


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
