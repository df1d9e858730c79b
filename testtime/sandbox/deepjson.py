"""JSON of any depth on the host: an iterative parser and comparisons that never recurse.

What a program returns comes back as JSON text of the program's making (it runs in the job's own process and
can replace the encoder), so it may be nested far deeper than Python's recursion limit: `json.loads` and `==`
on such values raise RecursionError, which on the host would crash the run, and every resume would crash at
the same problem. Parsing here keeps its own stack; comparing walks pairs from a work list.
"""

from __future__ import annotations

import re
from json.decoder import scanstring
from json.scanner import NUMBER_RE
from typing import Any

_SPACE = re.compile(r"[ \t\n\r]*")
_CONSTANTS = {
    "null": None,
    "true": True,
    "false": False,
    "NaN": float("nan"),
    "Infinity": float("inf"),
    "-Infinity": float("-inf"),
}


def _scalar(text: str, at: int) -> tuple[Any, int]:
    if text.startswith('"', at):
        return scanstring(text, at + 1, True)
    for word, value in _CONSTANTS.items():
        if text.startswith(word, at):
            return value, at + len(word)
    match = NUMBER_RE.match(text, at)
    if match is None:
        raise ValueError(f"not JSON at character {at}")
    integer, fraction, exponent = match.groups()
    value = float(integer + (fraction or "") + (exponent or "")) if fraction or exponent else int(integer)
    return value, match.end()


def loads(text: str) -> Any:
    """`json.loads(text)` for any depth (raises ValueError for what is not JSON)."""
    stack: list[tuple[list[Any] | dict[str, Any], str | None]] = []  # open containers, the key awaiting a value
    at = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
    while True:
        if at >= len(text):
            raise ValueError("unexpected end of JSON")
        char = text[at]
        if char in "[{":
            stack.append(([] if char == "[" else {}, None))
            at = _SPACE.match(text, at + 1).end()  # type: ignore[union-attr]
            if text.startswith("]" if char == "[" else "}", at):
                value, at = stack.pop()[0], at + 1
            elif char == "{":
                at = _key(text, at, stack)
                continue
            else:
                continue
        else:
            value, at = _scalar(text, at)
        # a value is complete: hand it to its container, closing containers as far as they end here
        while True:
            if not stack:
                if _SPACE.match(text, at).end() != len(text):  # type: ignore[union-attr]
                    raise ValueError("extra data after JSON")
                return value
            container, key = stack[-1]
            if isinstance(container, list):
                container.append(value)
            else:
                container[key] = value  # type: ignore[index]
            at = _SPACE.match(text, at).end()  # type: ignore[union-attr]
            closer = "]" if isinstance(container, list) else "}"
            if text.startswith(",", at):
                at = _SPACE.match(text, at + 1).end()  # type: ignore[union-attr]
                if isinstance(container, dict):
                    at = _key(text, at, stack)
                break
            if not text.startswith(closer, at):
                raise ValueError(f"expected ',' or '{closer}' at character {at}")
            value, at = stack.pop()[0], at + 1


def _key(text: str, at: int, stack: list[tuple[Any, str | None]]) -> int:
    """Read `"key":` for the object on top of the stack; returns where its value starts."""
    if not text.startswith('"', at):
        raise ValueError(f"expected a key at character {at}")
    key, at = scanstring(text, at + 1, True)
    at = _SPACE.match(text, at).end()  # type: ignore[union-attr]
    if not text.startswith(":", at):
        raise ValueError(f"expected ':' at character {at}")
    stack[-1] = (stack[-1][0], key)
    return _SPACE.match(text, at + 1).end()  # type: ignore[union-attr]


def equal(left: Any, right: Any) -> bool:
    """`left == right` for parsed JSON values of any depth (Python's rules for scalars: 1 == 1.0)."""
    pending = [(left, right)]
    while pending:
        a, b = pending.pop()
        if isinstance(a, list) or isinstance(b, list):
            if not (isinstance(a, list) and isinstance(b, list)) or len(a) != len(b):
                return False
            pending.extend(zip(a, b, strict=True))
        elif isinstance(a, dict) or isinstance(b, dict):
            if not (isinstance(a, dict) and isinstance(b, dict)) or a.keys() != b.keys():
                return False
            pending.extend((a[k], b[k]) for k in a)
        elif a != b:
            return False
    return True


def official_equal(encoded: Any, expected: Any) -> bool:
    """Whether the returned value in the harness's exact encoding (`harness_job.exact`) equals the expected
    JSON value as Python compares them, a top-level tuple made a list (LiveCodeBench's official grader).
    JSON holds no tuples or sets, and its keys are strings, so only lists, string-keyed dicts, scalars and
    non-finite floats can be equal; the walk needs no decoded value."""
    if _tag(encoded) == "~t":
        encoded = encoded["~t"]
    pending = [(encoded, expected)]
    while pending:
        value, want = pending.pop()
        tag = _tag(value)
        if isinstance(value, list):
            if not isinstance(want, list) or len(value) != len(want):
                return False
            pending.extend(zip(value, want, strict=True))
        elif tag == "~d":
            pairs = value["~d"]
            if not isinstance(want, dict) or not isinstance(pairs, list) or len(pairs) != len(want):
                return False
            for pair in pairs:
                if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and pair[0] in want):
                    return False
                pending.append((pair[1], want[pair[0]]))
            if len({pair[0] for pair in pairs}) != len(pairs):
                return False
        elif tag == "~f":
            try:
                if not (isinstance(value["~f"], str) and float(value["~f"]) == want):
                    return False
            except (ValueError, TypeError):
                return False
        elif isinstance(value, dict) or isinstance(want, (list, dict)) or value != want:
            return False  # a tuple, set, opaque object or untagged object: equal to no JSON value
    return True


def _tag(value: Any) -> str | None:
    return next(iter(value)) if isinstance(value, dict) and len(value) == 1 else None
