"""The installed command as nohup, CI and log files run it: stderr to a file, no --quiet, so the progress display
takes its off-terminal path (plain lines). A stream's total is unknown there; a regression in that path hid from
every test that passed --quiet."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TESTTIME = str(Path(sys.executable).with_name("testtime"))
ROWS = '{"id":"a","problem":"What is 1+1?"}\n{"id":"b","problem":"What is 2+2?"}\n'


def logged(tmp_path: Path, *args: str, stdin: str | None = None) -> tuple[int, str]:
    """Run `testtime ARGS`, stderr to a file; its exit status and what the file holds."""
    log = tmp_path / "stderr.log"
    with log.open("w") as stderr:
        done = subprocess.run(
            [TESTTIME, *args], input=stdin, stdout=subprocess.PIPE, stderr=stderr, text=True, timeout=120
        )
    return done.returncode, log.read_text()


def test_a_stdin_stream_with_stderr_to_a_file_answers_and_says_how_far_it_got(tmp_path: Path) -> None:
    out = tmp_path / "stream"
    status, said = logged(tmp_path, "run", "--bench", "-", "--n", "2", "--model", "fake:echo", "--out", str(out),
                          stdin=ROWS)  # fmt: skip
    assert status == 0, said
    assert "Traceback" not in said and "progress: 1 answered (a stream)" in said
    assert len((out / "results.jsonl").read_text().splitlines()) == 2


def test_a_batch_and_its_resume_with_stderr_to_a_file(tmp_path: Path) -> None:
    out = tmp_path / "batch"
    status, said = logged(tmp_path, "run", "--bench", "arith", "--limit", "3", "--n", "2", "--model", "fake:echo",
                          "--out", str(out))  # fmt: skip
    assert status == 0, said
    assert "Traceback" not in said and "progress: 3/3 problems" in said
    status, said = logged(tmp_path, "run", "--resume", str(out))
    assert status == 0 and "Traceback" not in said, said
