"""Append-only JSONL files that survive a kill -9: a line torn mid-write is dropped before anything is
appended after it, so the next record never glues onto a fragment (and is never lost with it)."""

from __future__ import annotations

import json
import os
from pathlib import Path


def repair_tail(path: Path) -> bool:
    """Cut a torn last line (the file does not end in a newline) off `path`; True when one was cut."""
    if not path.exists():
        return False
    with path.open("rb+") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return False
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return False
        # Read back in blocks until the last newline: everything after it is the torn record.
        end, keep = size, 0
        while end > 0:
            start = max(0, end - 65536)
            f.seek(start)
            block = f.read(end - start)
            cut = block.rfind(b"\n")
            if cut >= 0:
                keep = start + cut + 1
                break
            end = start
        f.truncate(keep)
    return True


def record_lines(text: str) -> list[str]:
    """The lines of a JSON-lines text, split on "\\n" only: `str.splitlines` also splits on U+2028, U+2029,
    U+0085 and others, which JSON writes raw inside strings, so one such character in an answer would cut a
    record in two. Blank lines are skipped."""
    return [line for line in text.split("\n") if line.strip()]


def read_records(path: Path) -> list[str]:
    """`record_lines` of a UTF-8 file."""
    return record_lines(path.read_text(encoding="utf-8"))


def is_json(line: str) -> bool:
    """Whether a line is one whole JSON value (a line torn by a kill -9 is not)."""
    try:
        json.loads(line)
    except json.JSONDecodeError:
        return False
    return True
