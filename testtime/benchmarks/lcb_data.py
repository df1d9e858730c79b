"""LiveCodeBench rows: test decoding, releases, filters. Facts from the grading reference (§2, §7).

Tests arrive as a list, a JSON string, or base64 → zlib → pickle → JSON string (private tests on the hub).
The pickle step is decoded with an unpickler that refuses every class, so a hostile file can only yield plain
values, never run code.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import re
import zlib
from datetime import date
from typing import Any

from testtime.core.errors import UserError
from testtime.core.records import TestCase

HUB_REPO = "livecodebench/code_generation_lite"
SHARDS = ("test.jsonl", "test2.jsonl", "test3.jsonl", "test4.jsonl", "test5.jsonl", "test6.jsonl")

# ERRATA.md of LiveCodeBench: graded against one of several valid outputs, unsolvable, or bad tests.
ERRATA = {
    **dict.fromkeys(
        [
            "abc311_c",
            "abc326_d",
            "abc327_b",
            "abc333_e",
            "abc343_e",
            "abc362_c",
            "abc343_a",
            "arc185_c",
            "find-words-containing-character",
            "find-the-peaks",
            "generate-binary-strings-without-adjacent-zeros",
        ],
        "multiple valid outputs, one accepted",
    ),
    **dict.fromkeys(["abc337_e", "abc355_e"], "interactive or unsolvable"),
    **dict.fromkeys(
        ["abc350_c", "apply-operations-to-make-string-empty", "most-frequent-ids", "arc189_a"], "bad tests"
    ),
}


class _NoClasses(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from test data")


def decode_tests(raw: Any) -> list[TestCase]:
    """Tests from any of the three encodings."""
    if raw in (None, "", []):
        return []
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            try:
                blob = zlib.decompress(base64.b64decode(raw))
                raw = json.loads(_NoClasses(io.BytesIO(blob)).load())
            except (zlib.error, pickle.UnpicklingError, EOFError, TypeError) as exc:
                raise ValueError(f"neither JSON nor the hub's encoding ({type(exc).__name__}: {exc})") from None
    if not isinstance(raw, list):
        raise ValueError("tests must decode to a list")
    return [TestCase(input=t["input"], output=t["output"], testtype=t.get("testtype", "stdin")) for t in raw]


def encode_private_tests(tests: list[TestCase]) -> str:
    """The hub's encoding, for fixtures and round-trip tests."""
    payload = json.dumps([t.model_dump() for t in tests])
    return base64.b64encode(zlib.compress(pickle.dumps(payload))).decode()


def release_shards(release: str) -> tuple[str, ...]:
    """`release_vN` is cumulative (shards 1..N); `vN` is shard N alone; `vA_vB` is shards A..B."""
    try:
        if release.startswith("release_v"):
            first, last = 1, int(release.removeprefix("release_v"))
        elif "_" in release:
            first, last = (int(part.removeprefix("v")) for part in release.split("_"))
        else:
            first = last = int(release.removeprefix("v"))
        if not 1 <= first <= last <= len(SHARDS):
            raise ValueError(release)
        return SHARDS[first - 1 : last]
    except ValueError:
        raise UserError(
            f"unknown LiveCodeBench release '{release}'; use release_v1..release_v6, v1..v6 or vA_vB"
        ) from None


_DAY = re.compile(r"^\s*(\d{4})-(\d{1,2})-(\d{1,2})(?:[T ].*)?$")


def parse_day(value: str | None, option: str) -> str | None:
    """An ISO day (YYYY-MM-DD; zero padding optional, a time part ignored) as a zero-padded string."""
    if value in (None, ""):
        return None
    match = _DAY.match(str(value))
    try:
        if match is None:
            raise ValueError(value)
        return date(*(int(part) for part in match.groups())).isoformat()
    except ValueError:
        raise UserError(f"{option}: expected a date YYYY-MM-DD, not '{value}'") from None


def _row_day(row: dict[str, Any]) -> str | None:
    match = _DAY.match(str(row.get("contest_date", "")))
    try:
        return date(*(int(part) for part in match.groups())).isoformat() if match else None
    except ValueError:
        return None


def keep(
    row: dict[str, Any], start_date: str | None, end_date: str | None, difficulty: str | None, platform: str | None
) -> bool:
    """The official loader's inclusive contest-date window (days compared as dates, not as raw text), plus
    difficulty and platform filters. A row without a readable date is outside any window."""
    day = _row_day(row)
    in_window = (not start_date or (day is not None and day >= start_date)) and (
        not end_date or (day is not None and day <= end_date)
    )
    return (
        in_window
        and (not difficulty or row.get("difficulty") == difficulty)
        and (not platform or row.get("platform") == platform)
    )


def metadata_of(row: dict[str, Any]) -> dict[str, Any]:
    """A row's `metadata` (a JSON string or an object); unreadable metadata is none, not a crash."""
    raw = row.get("metadata") or {}
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return {}
    return dict(value) if isinstance(value, dict) else {}
