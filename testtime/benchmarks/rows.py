"""Rows of a data file or hub dataset, checked as they are read: `.jsonl`, `.json`, `.csv` or `.parquet`, or
`hf:ORG/NAME` through the hub extra. Every problem with the input is one line that names the file and the
line or row (a bad byte, a line that is not JSON, an unreadable Parquet), never a traceback."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from testtime.core.errors import UserError

SUFFIXES = (".jsonl", ".ndjson", ".json", ".csv", ".parquet")
FIELD_LIMIT = 64 << 20  # bytes in one CSV field; a larger one is refused, not truncated


class Row(dict[str, Any]):
    """One row, and where it came from (`file:line` or `file: row N`, and `line N` / `row N` alone) for errors."""

    where: str = ""
    position: str = ""


def _row(values: dict[str, Any], where: str, position: str) -> Row:
    row = Row(values)
    row.where, row.position = where, position
    return row


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of a file read a line at a time, each line's bytes decoded on their own (a bad byte
    names its line and column), its newline kept, a leading byte-order mark dropped."""
    try:
        with path.open("rb") as f:
            for number, raw in enumerate(f, 1):
                line = utf8_line(raw, f"{path}:{number}")
                yield number, line.removeprefix("\ufeff") if number == 1 else line
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None


def utf8_line(raw: bytes, where: str) -> str:
    """One line of bytes as text, or a UserError naming the bad byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(f"{where}: not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})") from None


def _parsed(text: str, where: str) -> Any:
    """JSON text as a value, every failure one UserError naming `where`: invalid JSON, nesting past Python's
    limit, an integer of more digits than Python converts, an unpaired surrogate escape (\\ud800), which is
    no text and could not be written back out."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        line = f":{exc.lineno}" if "\n" in text.strip() else ""  # a whole file's text: name the line
        raise UserError(f"{where}{line}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise UserError(f"{where}: JSON nested too deeply") from None
    except ValueError as exc:  # int() past sys.get_int_max_str_digits
        raise UserError(f"{where}: a number too long to read ({str(exc)[:80]})") from None
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise UserError(f"{where}: holds an unpaired surrogate escape (\\ud800-\\udfff), which is not text") from None
    return value


def line_row(line: str, where: str, number: int) -> Row:
    """One JSON-lines line as a row (`where` names its file and line in errors; a stream's too)."""
    value = _parsed(line, where)
    if not isinstance(value, dict):
        raise UserError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return _row(value, where, f"line {number}")


def jsonl_rows(path: Path, limit: int | None = None) -> list[Row]:
    """The rows of a JSON-lines file; with `limit`, only the first `limit` (the rest is never read)."""
    rows: list[Row] = []
    for number, line in _lines(path):
        if limit is not None and len(rows) >= limit:
            break
        if line.strip():
            rows.append(line_row(line.rstrip("\n"), f"{path}:{number}", number))
    return rows


def json_rows(path: Path, limit: int | None = None) -> list[Row]:
    """A JSON list of objects, or an object holding one such list (`{"data": [...]}`)."""
    value = _parsed("".join(line for _, line in _lines(path)), str(path))
    if isinstance(value, dict):
        lists = [v for v in value.values() if isinstance(v, list)]
        if len(lists) != 1:
            raise UserError(f"{path}: expected a JSON list of objects (or an object holding exactly one list)")
        value = lists[0]
    if not isinstance(value, list):
        raise UserError(f"{path}: expected a JSON list of objects, got {type(value).__name__}")
    rows = []
    for number, item in enumerate(value, 1):
        if not isinstance(item, dict):
            raise UserError(f"{path}: row {number}: expected a JSON object, got {type(item).__name__}")
        rows.append(_row(item, f"{path}: row {number}", f"row {number}"))
    return rows[:limit] if limit is not None else rows


def csv_rows(path: Path, limit: int | None = None) -> list[Row]:
    """Every value is text; an empty cell is a missing value (a row without its label, say). Read a line at a
    time: with `limit`, only the first `limit` rows."""
    csv.field_size_limit(FIELD_LIMIT)
    # strict: a quote never closed is an error, not one cell that swallows every row after it
    reader = csv.DictReader((line for _, line in _lines(path)), strict=True)
    rows: list[Row] = []
    started = 1  # the line the row being read starts on: where an unclosed quote opened
    try:
        header = reader.fieldnames or []
        if len(set(header)) != len(header):
            raise UserError(f"{path}:1: the header names a column twice ({', '.join(header)})")
        started = reader.line_num + 1
        for values in reader:
            if limit is not None and len(rows) >= limit:
                break
            if None in values:
                raise UserError(f"{path}:{reader.line_num}: more cells than the header has columns")
            cells = {k: (v if v != "" else None) for k, v in values.items()}
            rows.append(_row(cells, f"{path}:{reader.line_num}", f"line {reader.line_num}"))
            started = reader.line_num + 1
    except csv.Error as exc:
        if "unexpected end of data" in str(exc):
            raise UserError(f"{path}:{started}: a quote opened in this row is never closed (not valid CSV)") from None
        raise UserError(f"{path}:{reader.line_num}: not valid CSV ({exc})") from None
    return rows


def parquet_rows(path: Path, limit: int | None = None) -> list[Row]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UserError(f"reading {path} needs pyarrow: pip install 'testtime[hub]'") from None
    try:
        table = pq.read_table(path)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise UserError(f"cannot read {path} as Parquet: {str(exc).splitlines()[0][:200]}") from None
    if limit is not None:
        table = table.slice(0, limit)
    return [_row(v, f"{path}: row {n}", f"row {n}") for n, v in enumerate(table.to_pylist(), 1)]


def file_rows(path: Path, limit: int | None = None) -> list[Row]:
    """Rows of a data file by its suffix, the first `limit` if given; an empty file is an error, not an empty
    benchmark."""
    readers = {
        ".jsonl": jsonl_rows,
        ".ndjson": jsonl_rows,
        ".json": json_rows,
        ".csv": csv_rows,
        ".parquet": parquet_rows,
    }
    reader = readers.get(path.suffix.lower())
    if reader is None:
        raise UserError(f"{path}: unknown kind of data file; use one of {', '.join(SUFFIXES)}")
    if not path.is_file():
        raise UserError(f"cannot read {path}: {'not a file' if path.exists() else 'no such file'}")
    rows = reader(path, limit)
    if not rows:
        raise UserError(f"{path} holds no rows")
    return rows


def read_jsonl(path: Path, required: tuple[str, ...], id_field: str | None = None) -> list[dict[str, Any]]:
    """Rows of a JSONL file with fixed fields (the built-in benchmarks' files, predictions to grade): the
    required fields present, and (with `id_field`) no id twice."""
    rows = jsonl_rows(path)
    first_seen: dict[str, str] = {}
    for row in rows:
        missing = [k for k in required if row.get(k) in (None, "")]
        if missing:
            raise UserError(f"{row.where}: missing field(s) {', '.join(missing)}")
        if id_field is not None:
            key = str(row[id_field])
            if key in first_seen:
                raise UserError(f"{row.where}: duplicate {id_field} '{key}' (first on {first_seen[key]})")
            first_seen[key] = row.position
    if not rows:
        raise UserError(f"{path} holds no rows")
    return list(rows)


def hub_rows(hub_id: str, split: str | None, config: str | None, for_what: str) -> tuple[list[Row], str]:
    """Rows of a public hub dataset (needs the `datasets` package and network), and the split they came from:
    the one named, else the dataset's only split (MathArena's sets have only `train`); several: name one."""
    try:
        import datasets
    except ImportError:
        raise UserError(f"{for_what} loads hub dataset {hub_id}, which needs `pip install 'testtime[hub]'`") from None
    try:
        if split is None:
            split = _only_split(hub_id, config, datasets.get_dataset_split_names(hub_id, config))
        loaded = datasets.load_dataset(hub_id, config, split=split)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - offline, gated, renamed, no such split: all mean "cannot load it"
        raise UserError(
            f"cannot load hub dataset {hub_id} (config {config}, split {split or 'any'}) for {for_what}: "
            f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        ) from None
    return [_row(dict(v), f"{hub_id} [{split}] row {n}", f"row {n}") for n, v in enumerate(loaded, 1)], split


def _only_split(hub_id: str, config: str | None, names: list[str]) -> str:
    if len(names) == 1:
        return names[0]
    raise UserError(
        f"hub dataset {hub_id}{f' (config {config})' if config else ''} has splits {', '.join(names) or 'none'}: "
        "name one with --bench-opt split=NAME"
    )
