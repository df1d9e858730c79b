"""The run settings every command shares, declared once: `@run_settings()` adds these flags to a command
(`run`, `ablate depth-width`, `ttrl controls`, later `serve`), and hands the command one `SharedFlags` in
place of twenty parameters. A command may leave some out or change a default (`ttrl controls` evaluates at
concurrency 64), never redeclare one."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from testtime.benchmarks import BENCHMARKS
from testtime.core.adaptive import FLAGS, Adaptive
from testtime.core.errors import UserError, first_error
from testtime.core.options import parse_options
from testtime.models import DEFAULT_MODEL
from testtime.run.settings import RunSettings, absolute_paths, api_bases

Opt = typer.Option

# name → (annotation with its flag and help, default). Order is the order --help lists them in.
SHARED: dict[str, tuple[Any, Any]] = {
    "bench": (
        Annotated[
            str,
            Opt(
                help=" | ".join(BENCHMARKS.builtin_names()) + " (and plugins': `testtime list`), a data file, "
                "hf:ORG/NAME, or - (a --stream on standard input)"
            ),
        ],
        "arith",
    ),
    "model": (
        Annotated[str, Opt(help="hf:<path|alias>, litellm:<provider/model>, openai:<model>, vllm:<path>, fake:...")],
        DEFAULT_MODEL,
    ),
    "n": (Annotated[int | None, Opt(help="samples per problem (majority, default 8; ttrl: evaluation samples)")], None),
    "limit": (Annotated[int | None, Opt(help="only the first N problems")], None),
    "seed": (Annotated[int, Opt(help="base seed; every sample derives its own")], 0),
    "temperature": (
        Annotated[float | None, Opt(help="0 = greedy (default: the method's; single/majority 0.7, trt 0.6, rsa 1.0)")],
        None,
    ),
    "top_p": (Annotated[float | None, Opt(help="nucleus sampling (default 1.0)")], None),
    "max_tokens": (
        Annotated[int | None, Opt(help="max new tokens per call (default: single/majority 512, trt 32768, rsa 8192)")],
        None,
    ),
    "concurrency": (
        Annotated[int, Opt(help="model calls in flight (also the local batch size: 64 suits hf: on CPU)")],
        16,
    ),
    "data_dir": (
        Annotated[str | None, Opt(help="folder with <bench>.jsonl (or $TESTTIME_DATA_DIR); default: the hub")],
        None,
    ),
    "bench_opt": (Annotated[list[str] | None, Opt("--bench-opt", help="benchmark option KEY=VALUE, repeatable")], None),
    "api_base": (
        Annotated[
            list[str] | None,
            Opt(
                help="OpenAI-compatible server URL (litellm:, openai:); repeat it, or name a file of URLs, for a fleet"
            ),
        ],
        None,
    ),
    "api_key_env": (Annotated[str | None, Opt(help="env var holding the API key (never written to disk)")], None),
    "routing": (
        Annotated[
            str | None,
            Opt(
                help="a fleet (openai:): affinity (default: a problem's calls on one server, its prefix cache "
                "reused; the next server when it fails or is saturated) | least-loaded (each call by load)"
            ),
        ],
        None,
    ),
    "n_per_request": (
        Annotated[
            bool,
            Opt(
                "--n-per-request",
                help="openai: servers: a problem's samples in one request with n (one prefill); the cache "
                "and ledger stay per sample",
            ),
        ],
        False,
    ),
    "request_timeout": (
        Annotated[float, Opt(help="seconds one attempt of a model call may take, then retried")],
        600.0,
    ),
    "sandbox": (Annotated[str, Opt(help="code benchmarks: auto | docker | bwrap (never the bare host)")], "auto"),
    "max_cost": (Annotated[float | None, Opt(help="stop cleanly at this spend (USD); resume with a larger one")], None),
    "max_planned_calls": (
        Annotated[
            int,
            Opt(
                help="the ceiling a run's planned model calls (a problem's × the problems) must stay under, checked "
                "before anything is paid; raise it when you mean a plan that large"
            ),
        ],
        1_000_000,
    ),
    "price": (
        Annotated[
            str | None,
            Opt(
                help="PROMPT,COMPLETION: USD per million tokens, for a model whose calls come back unpriced (openai: "
                "servers, a model litellm has no price for), so --max-cost binds; resumable with another"
            ),
        ],
        None,
    ),
    "max_tokens_total": (Annotated[int | None, Opt(help="stop cleanly at this many tokens; resumable")], None),
    "logprobs": (
        Annotated[
            int | None,
            Opt(
                help="record each sample's mean token log-prob, entropy and self-certainty: K alternatives a token "
                "from a server (0-20); hf: always its full distribution"
            ),
        ],
        None,
    ),
    "adaptive": (
        Annotated[
            bool,
            Opt(
                "--adaptive",
                help="a vote draws its samples in waves and stops once settled (--n is the cap; majority, a served "
                "request's vote, and ttrl's votes: a stream's answers, the training vote's extra samples); off by "
                "default so published tables stay comparable",
            ),
        ],
        False,
    ),
    **{  # the rule's fields, from its one model: None is "not given" (the rule's default, and no --adaptive needed)
        flag: (Annotated[info.annotation | None, Opt(help=info.description)], None)  # type: ignore[name-defined]
        for flag, info in ((FLAGS[name], info) for name, info in Adaptive.model_fields.items())
    },
    "quiet": (Annotated[bool, Opt(help="no progress display")], False),
}


# The early stop of a vote: a command whose runs draw no stoppable vote (a grid of TRT, verl's trainer, TTRL's
# reward comparisons) leaves these flags out.
ADAPTIVE = ("adaptive", *FLAGS.values())


@dataclass(frozen=True)
class SharedFlags:
    """The shared flags as given; `settings(...)` turns them into the run's `RunSettings`."""

    values: dict[str, Any]

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None

    def bench_options(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        return {**parse_options(self.values.get("bench_opt") or [], "--bench-opt"), **(extra or {})}

    def settings(self, method: str, method_options: dict[str, Any], **overrides: Any) -> RunSettings:
        """The run's settings: these flags, the method and its options, and what the command fixes itself."""
        rule_flags = set(FLAGS.values())
        rule = [f for f in FLAGS.values() if self.values.get(f) is not None]
        if rule and "adaptive" in self.values and not self.values["adaptive"]:
            raise UserError(f"--{rule[0].replace('_', '-')} sets how --adaptive stops a vote: add --adaptive")
        given = {
            k: v
            for k, v in self.values.items()
            if k in RunSettings.model_fields and not (k in rule_flags and v is None)  # not given: the rule's default
        }
        given["bench_options"] = self.bench_options(overrides.pop("bench_options", None))
        absolute_paths(given)
        given["api_base"] = api_bases(self.values.get("api_base"))
        try:
            return RunSettings(**{**given, **overrides}, method=method, method_options=method_options)
        except ValidationError as exc:
            where, message = first_error(exc)
            raise UserError(f"--{where.replace('_', '-')}: {message}" if where else message) from None

    @property
    def progress(self) -> bool:
        """Progress unless --quiet: bars on a terminal, plain lines elsewhere (`display.RunProgress`)."""
        return not self.values.get("quiet")


def run_settings(
    exclude: tuple[str, ...] = (), defaults: dict[str, Any] | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add the shared flags (but `exclude`) to a typer command whose last parameter is `flags: SharedFlags`."""

    def wrap(command: Callable[..., Any]) -> Callable[..., Any]:
        own = [p for name, p in inspect.signature(command, eval_str=True).parameters.items() if name != "flags"]
        shared = []
        for name, (annotation, default) in SHARED.items():
            if name in exclude:
                continue
            shared.append(
                inspect.Parameter(
                    name,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=(defaults or {}).get(name, default),
                    annotation=annotation,
                )
            )

        added = {p.name for p in shared}

        @functools.wraps(command)
        def with_flags(*args: Any, **kwargs: Any) -> Any:
            values = {name: kwargs.pop(name) for name in added if name in kwargs}
            return command(*args, flags=SharedFlags(values), **kwargs)

        with_flags.__signature__ = inspect.Signature([*own, *shared])  # type: ignore[attr-defined]
        with_flags.__annotations__ = {p.name: p.annotation for p in [*own, *shared]}
        return with_flags

    return wrap
