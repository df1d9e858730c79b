"""A method's own command-line flags, read from its options model: `testtime run --method trt -T 4 -K 2
--no-strategies` without `run` declaring any of them.

A field that declares flags (`core.options.flag`) takes `--flag VALUE`, `--flag=VALUE` or `-F VALUE`;
a boolean field is switched with `--flag` / `--no-flag`. A flag the chosen method does not declare is a
one-line error that says which method it belongs to, if any.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from testtime.core.errors import UserError
from testtime.core.options import Options


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
    args: Sequence[str], method: str, options: type[Options], others: Mapping[str, type[Options]]
) -> dict[str, Any]:
    """Field → value from the flags in `args`; `others` (name → options) only improve the error message."""
    spellings = _spellings(options)
    values: dict[str, Any] = {}
    tokens = list(args)
    while tokens:
        token = tokens.pop(0)
        spelling, sep, inline = token.partition("=")
        if spelling not in spellings:
            owners = [name for name, other in others.items() if spelling in _spellings(other)]
            where = f"; it is an option of {', '.join(owners)}" if owners else ""
            known = ", ".join(sorted(s for s in spellings if not s.startswith("--no-"))) or "none of its own"
            raise UserError(f"{spelling} is not an option of --method {method}{where} (its flags: {known})")
        name, bare = spellings[spelling]
        if bare is not None and not sep:
            values[name] = bare
        elif sep:
            values[name] = inline
        elif tokens and not tokens[0].startswith("--"):
            values[name] = tokens.pop(0)
        else:
            raise UserError(f"{spelling} needs a value")
    return values


def help_text(methods: Mapping[str, type[Options]]) -> str:
    """Each method's own flags, one paragraph per method, for `run --help` (all options: `testtime list`)."""
    paragraphs = ["Method flags (every option, flagged or not, also as --method-opt KEY=VALUE; all: testtime list):"]
    for method, options in methods.items():
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
        paragraphs.append(f"{method}: " + "; ".join(parts))
    return "\n\n".join(paragraphs)
