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
