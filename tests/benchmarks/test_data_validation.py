"""Data is checked as it is loaded: a bad byte, a bad line, a missing field, a duplicate id, an unpadded or
nonsense date. Each is one line naming file and line (never a traceback, never silently dropped rows)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmarks.test_lcb import hub_row, write_rows
from testtime.benchmarks import BENCHMARKS, load_benchmarks
from testtime.core.errors import UserError

load_benchmarks()


def math_file(folder: Path, lines: list[bytes]) -> Path:
    (folder / "aime24.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    return folder


GOOD = json.dumps({"id": "a", "problem": "1+1?", "answer": "2"}).encode()


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([GOOD, b'{"id": "b", "problem": "caf\xe9", "answer": "1"}'], r"aime24.jsonl:2: not valid UTF-8 \(byte 0xe9"),
        ([GOOD, b'{"id": "b", "problem"'], r"aime24.jsonl:2: not valid JSON"),
        ([GOOD, b"[1, 2]"], r"aime24.jsonl:2: expected a JSON object"),
        ([GOOD, json.dumps({"id": "b", "problem": "x"}).encode()], r"aime24.jsonl:2: missing field\(s\) answer"),
        ([GOOD, GOOD], r"aime24.jsonl:2: duplicate id 'a' \(first on line 1\)"),
    ],
)
def test_a_bad_math_file_is_one_line_naming_file_and_line(tmp_path: Path, lines: list[bytes], message: str) -> None:
    with pytest.raises(UserError, match=message):
        BENCHMARKS.create("aime24", data_dir=math_file(tmp_path, lines)).load()


def test_a_duplicate_livecodebench_id_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="duplicate question_id 'abc999_a'"):
        BENCHMARKS.create("lcb-v6", data_dir=write_rows(tmp_path, [hub_row(), hub_row()])).load()


@pytest.mark.parametrize("spelled", ["2025-2-1", "2025-02-01", "2025-02-01T00:00:00"])
def test_dates_are_compared_as_dates_whatever_their_padding(tmp_path: Path, spelled: str) -> None:
    rows = [hub_row("early", contest_date="2025-01-31T00:00:00"), hub_row("late", contest_date="2025-2-1")]
    problems, _ = BENCHMARKS.create("lcb-v6", data_dir=write_rows(tmp_path, rows), start_date=spelled).load()
    assert [p.id for p in problems] == ["late"]


@pytest.mark.parametrize(
    ("option", "value"), [("start_date", "notadate"), ("end_date", "2025-13-01"), ("start_date", "24-9-1")]
)
def test_a_date_that_is_not_one_is_refused_with_the_format(option: str, value: str) -> None:
    with pytest.raises(UserError, match=f"{option}: expected a date YYYY-MM-DD, not '{value}'"):
        BENCHMARKS.create("lcb-v6", **{option: value})


def test_the_cli_says_it_in_one_line(tmp_path: Path, testtime_cli) -> None:  # type: ignore[no-untyped-def]
    data = math_file(tmp_path, [GOOD, b'{"id": "b", "problem": "\xff", "answer": "1"}'])
    out = tmp_path / "run"
    done = testtime_cli("run", "--bench", "aime24", "--data-dir", str(data), "--model", "fake:", "--out", str(out))
    assert done.returncode == 2 and "aime24.jsonl:2: not valid UTF-8" in done.stderr
    assert "Traceback" not in done.stderr and not out.exists()


@pytest.mark.parametrize(
    ("row", "options", "message"),
    [
        (hub_row(public_test_cases="just some words"), {}, "undecodable tests"),
        (
            hub_row(
                public_test_cases=json.dumps([{"input": "1", "output": "1", "testtype": "functional"}]), metadata="{}"
            ),
            {},
            "functional tests but no func_name",
        ),
        (hub_row(), {"release": "v99"}, "unknown LiveCodeBench release 'v99'"),
        (hub_row(), {"release": "release_v5"}, "--release release_v5 chooses hub shards"),
    ],
)
def test_a_bad_livecodebench_row_or_option_is_one_line(tmp_path: Path, row: dict, options: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        BENCHMARKS.create("lcb-v6", data_dir=write_rows(tmp_path, [row]), **options).load()
