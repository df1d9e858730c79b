"""`testtime ablate adaptive`, run as users run it (the installed command, stderr to a file, no --quiet): one fixed
run is paid for, and each threshold read off it is what a real adaptive run at that threshold draws."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

TESTTIME = str(Path(sys.executable).with_name("testtime"))


@pytest.mark.slow
def test_a_sweep_reads_off_what_real_adaptive_runs_draw(tmp_path: Path, scripted_model: str) -> None:
    common = ["--bench", "arith", "--limit", "4", "--n", "8", "--model", scripted_model, "--temperature", "1.0",
              "--max-tokens", "16"]  # fmt: skip
    log = tmp_path / "sweep.log"
    with log.open("w") as stderr:
        swept = subprocess.run(
            [TESTTIME, "ablate", "adaptive", *common, "--thresholds", "0.6,0.9", "--out", str(tmp_path / "sweep")],
            stdout=subprocess.PIPE, stderr=stderr, text=True, timeout=600,
        )  # fmt: skip
    assert swept.returncode == 0, log.read_text()
    rows = {row["series"]: row for row in csv.DictReader((tmp_path / "sweep" / "sweep.csv").open())}
    assert {"adaptive posterior 0.6", "adaptive posterior 0.9"} <= set(rows)
    paid = [json.loads(line) for line in (tmp_path / "sweep" / "fixed" / "ledger.jsonl").read_text().splitlines()]
    assert len([e for e in paid if not e.get("cached")]) == 4 * 8  # the one fixed run is all the sweep paid
    for threshold in ("0.6", "0.9"):
        out = tmp_path / f"real-{threshold}"
        done = subprocess.run(
            [TESTTIME, "run", *common, "--adaptive", "--adaptive-threshold", threshold, "--out", str(out), "--quiet"],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        real = sum(line["adaptive"]["drawn"] for line in lines) / len(lines)
        assert float(rows[f"adaptive posterior {threshold}"]["samples"]) == pytest.approx(real)


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--thresholds", "0.3"], "a confidence between 0.5 and 1, not 0.3"),
        (["--thresholds", "nan"], "not nan"),
        (["--thresholds", ""], "expects comma-separated numbers"),
        (["--thresholds", "0.8,,0.9"], "expects comma-separated numbers"),
        (["--thresholds", "0.8,0.8"], "0.8 is given twice"),
        (["--adaptive-rule", "window", "--thresholds", "99"], "wider than the cap of 4"),
        (["--adaptive-min", "9"], "--adaptive-min: 9 samples before any stop is past the cap of 4"),
    ],
)
def test_a_threshold_the_sweep_cannot_read_is_one_line_before_anything_is_paid(
    tmp_path: Path, flags: list[str], words: str
) -> None:
    out, log = tmp_path / "sweep", tmp_path / "sweep.log"
    with log.open("w") as stderr:
        done = subprocess.run(
            [TESTTIME, "ablate", "adaptive", "--limit", "2", "--n", "4", "--model", "fake:echo", "--out", str(out),
             *flags], stdout=subprocess.PIPE, stderr=stderr, text=True, timeout=120,
        )  # fmt: skip
    said = log.read_text()
    errors = [line for line in said.splitlines() if line.startswith("error")]
    assert done.returncode == 2 and "Traceback" not in said and len(errors) == 1 and words in errors[0], said
    assert not (out / "fixed").exists()


def test_a_sweep_never_reports_another_runs_numbers(tmp_path: Path) -> None:
    """`OUT/fixed` holds a finished run of --n 4: a sweep asking --n 8 (or another seed, temperature or model) is
    refused in one line naming the difference, and sweep.csv is not rewritten; the same flags reuse it."""
    out = tmp_path / "sweep"
    common = ["ablate", "adaptive", "--limit", "2", "--model", "fake:echo", "--out", str(out), "--quiet"]
    first = subprocess.run([TESTTIME, *common, "--n", "4"], capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    written = (out / "sweep.csv").read_text()
    for flags, words in ((["--n", "8"], "made with n 4, where this asks for 8"),
                         (["--n", "4", "--bench-opt", "seed=2"], "bench_options"),
                         (["--n", "4", "--temperature", "0.7"], "temperature")):  # fmt: skip
        other = subprocess.run([TESTTIME, *common, *flags], capture_output=True, text=True, timeout=120)
        errors = [line for line in other.stderr.splitlines() if line.startswith("error")]
        assert other.returncode == 2 and len(errors) == 1 and words in errors[0], other.stderr
        assert (out / "sweep.csv").read_text() == written
    again = subprocess.run([TESTTIME, *common, "--n", "4"], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
