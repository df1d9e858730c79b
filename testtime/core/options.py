"""Options of a method or selector, declared once as a pydantic model.

Values arrive as text (`--method-opt KEY=VALUE`, `--selector-opt`, a method's own flags) or as Python values
(tests, config.json); pydantic coerces and checks them, and every failure becomes one line naming the owner
and the field. A field may declare command-line flags with `flag(...)`: `testtime run` accepts them for the
chosen method, and `--help` and `testtime list` show them from the same declaration.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from testtime.core.errors import UserError, first_error

OptionsT = TypeVar("OptionsT", bound="Options")


def flag(default: Any, help: str, *names: str, **field_args: Any) -> Any:
    """A field with a help text and, optionally, its own command-line flags (e.g. "--rounds", "-T")."""
    return Field(default, description=help, json_schema_extra={"flags": list(names)} if names else None, **field_args)


def parse_options(pairs: list[str], flag: str) -> dict[str, str]:
    """`["digits=2", "ops=+-"]` → dict, as `--bench-opt`, `--method-opt` and `--selector-opt` give them; a pair
    without '=' is a one-line error naming the flag."""
    options = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UserError(f"{flag} expects KEY=VALUE, got '{pair}'")
        options[key.strip()] = value.strip()
    return options


class Options(BaseModel):
    """A method's, selector's or benchmark's options: pydantic fields, each with a description; `flag(...)`
    gives one a command-line flag of its own. Values arrive as text from the CLI and are validated here."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # no option means inf or nan

    @classmethod
    def migrate(cls, values: dict[str, Any]) -> dict[str, Any]:
        """Older spellings of these options, rewritten to the current ones (overridden where needed)."""
        return values

    @classmethod
    def parse(cls: type[OptionsT], values: Mapping[str, Any], owner: str) -> OptionsT:
        values = cls.migrate(dict(values))
        unknown = sorted(set(values) - set(cls.model_fields))
        if unknown:
            close = difflib.get_close_matches(unknown[0], cls.model_fields, n=1)
            hint = f"did you mean {close[0]}?" if close else f"its options: {', '.join(cls.model_fields) or 'none'}"
            raise UserError(f"{owner} does not take option '{unknown[0]}'; {hint}")
        try:
            return cls.model_validate(dict(values))
        except ValidationError as exc:
            where, message = first_error(exc)
            raise UserError(f"{owner} option {where}: {message}" if where else f"{owner}: {message}") from None

    @classmethod
    def flags(cls) -> dict[str, str]:
        """Command-line flag → field name, for the fields that declare flags."""
        found = {}
        for name, info in cls.model_fields.items():
            extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
            for spelling in extra.get("flags", []):
                found[str(spelling)] = name
        return found

    @classmethod
    def help_rows(cls) -> list[tuple[str, str, str]]:
        """(option with its flags, default, help) for `--help` and `testtime list`."""
        rows = []
        by_field: dict[str, list[str]] = {}
        for spelling, name in cls.flags().items():
            by_field.setdefault(name, []).append(spelling)
        for name, info in cls.model_fields.items():
            spellings = "/".join(by_field.get(name, []))
            label = f"{name} ({spellings})" if spellings else name
            default = "" if info.is_required() else repr(info.get_default(call_default_factory=True))
            rows.append((label, default, info.description or ""))
        return rows
