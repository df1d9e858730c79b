"""A method's and a benchmark's own command-line flags, read from their options models: `testtime run --method
trt -T 4 -K 2 --no-strategies --bench lcb-v6 --difficulty hard` without `run` declaring any of them.

A field that declares flags (`core.options.flag`) takes `--flag VALUE`, `--flag=VALUE` or `-F VALUE`;
a boolean field is switched with `--flag` / `--no-flag`. A flag neither the chosen method nor the benchmark
declares is a one-line error that says which method it belongs to, if any.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from testtime.core.errors import UserError
from testtime.core.options import Options, parse_options


def _is_bool(options: type[Options], name: str) -> bool:
    return options.model_fields[name].annotation is bool


def _spellings(options: type[Options]) -> dict[str, tuple[str, Any]]:
    """Every accepted spelling → (field, value for a bare boolean flag, or None)."""
    found: dict[str, tuple[str, Any]] = {}
    for spelling, name in options.flags().items():
        found[spelling] = (name, True if _is_bool(options, name) else None)
        if _is_bool(options, name) and spelling.startswith("--"):
            found[f"--no-{spelling[2:]}"] = (name, False)
    return found


def parse_flags(
    args: Sequence[str], owners: Mapping[str, type[Options]], others: Mapping[str, type[Options]]
) -> dict[str, dict[str, Any]]:
    """Owner → {field: value} from the flags in `args`, each flag going to the owner that declares it (the
    chosen method, the benchmark); `others` (method name → options) only improve the error message."""
    spellings = {s: (owner, field) for owner, options in owners.items() for s, field in _spellings(options).items()}
    values: dict[str, dict[str, Any]] = {owner: {} for owner in owners}
    tokens = list(args)
    while tokens:
        token = tokens.pop(0)
        spelling, sep, inline = token.partition("=")
        if spelling not in spellings:
            holders = [name for name, other in others.items() if spelling in _spellings(other)]
            where = f"; it is an option of --method {', '.join(holders)}" if holders else ""
            how, field = "", spelling.lstrip("-").replace("-", "_")
            for owner, options in owners.items():  # an option without a flag of its own: say how to give it
                if not how and field in options.model_fields:
                    kind = "--method-opt" if owner.startswith("--method") else "--bench-opt"
                    value = inline or (tokens[0] if tokens and not tokens[0].startswith("-") else "VALUE")
                    how = f"; give it as {kind} {field}={value}"
            known = ", ".join(sorted(s for s in spellings if not s.startswith("--no-")))
            flags = f" (their flags: {known})" if known else " (they take no flags of their own)"
            raise UserError(f"{spelling} is not an option of {' or '.join(owners)}{where}{flags}{how}")
        owner, (name, bare) = spellings[spelling]
        if bare is not None and not sep:
            values[owner][name] = bare
        elif sep:
            values[owner][name] = inline
        elif tokens and not tokens[0].startswith("--"):
            values[owner][name] = tokens.pop(0)
        else:
            raise UserError(f"{spelling} needs a value")
    return values


def run_options(
    method: str,
    bench: str | None,
    flags: list[str],
    method_pairs: list[str],
    selector: str | None,
    selector_pairs: list[str],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(method options, benchmark options) from the command line's extra flags, `--method-opt` pairs and
    `--selector`/`--selector-opt`. Benchmark options from `--bench-opt` are the caller's to add."""
    from testtime.benchmarks import options_of
    from testtime.methods import METHODS, load_methods

    load_methods()
    _no_inspect_task_args(flags)
    chosen = METHODS.get(method)
    others = {name: METHODS.get(name).Options for name in METHODS.names() if name != method}  # type: ignore[attr-defined]
    owners = {f"--method {method}": chosen.Options}  # type: ignore[attr-defined]
    if bench is not None:  # `serve` has no benchmark: only the method owns flags
        owners[f"--bench {bench}"] = options_of(bench)
    parsed = parse_flags(flags, owners, others)
    options: dict[str, Any] = {**parse_options(method_pairs, "--method-opt"), **parsed[f"--method {method}"]}
    if selector is not None or selector_pairs:
        if "selector" not in chosen.Options.model_fields:  # type: ignore[attr-defined]
            raise UserError(f"--method {method} selects nothing: --selector and --selector-opt do not apply")
        if selector is not None:
            options["selector"] = selector
        if selector_pairs:
            options["selector_options"] = parse_options(selector_pairs, "--selector-opt")
    return options, parsed.get(f"--bench {bench}", {})


def _no_inspect_task_args(flags: list[str]) -> None:
    """`-T key=value` is how inspect passes task arguments; here -T is TRT's rounds. Say so, not "not an integer"."""
    for i, flag in enumerate(flags):
        value = flags[i + 1] if flag == "-T" and i + 1 < len(flags) else flag[2:] if flag.startswith("-T") else ""
        if "=" in value:
            raise UserError(
                f"-T is TRT's rounds here (a number), not inspect's task arguments: give '{value}' as "
                f"--bench-opt {value} (a benchmark's option) or --method-opt {value} (a method's)"
            )


def bench_flags(bench: str, args: list[str]) -> dict[str, Any]:
    """A benchmark's own flags (`--release`, `--difficulty`...) given to a command that takes no method."""
    from testtime.benchmarks import options_of

    options = options_of(bench)
    return parse_flags(args, {f"--bench {bench}": options}, {})[f"--bench {bench}"]


def help_text(
    owners: Mapping[str, type[Options]],
    title: str = "Method and benchmark flags (every option also as --method-opt / --bench-opt KEY=VALUE):",
) -> str:
    """Each method's and benchmark's own flags, one paragraph each, for `run --help` (all: `testtime list`)."""
    paragraphs = [title]
    for owner, options in owners.items():
        by_field: dict[str, list[str]] = {}
        for spelling, name in options.flags().items():
            by_field.setdefault(name, []).append(spelling)
        if not by_field:
            continue
        parts = []
        for name, spellings in by_field.items():
            info = options.model_fields[name]
            default = info.get_default(call_default_factory=True)
            shown = "/".join(spellings) + ("" if info.annotation is bool else " X")
            known = "" if default is None else f" (default {default})"
            parts.append(f"{shown} {info.description or name}{known}")
        paragraphs.append(f"{owner}: " + "; ".join(parts))
    return "\n\n".join(paragraphs)
