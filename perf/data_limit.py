"""The cost of loading a user's data file under `--limit`: a file of a million rows (JSON lines and CSV) loaded
whole and with `--limit 3`, seconds and peak Python memory side by side. `--limit` reads only the rows it
keeps (a line at a time); the data's sha256 (the run's record of which data it ran on) still covers the whole
file, a block at a time. Goal: `--limit 3` in well under a second whatever the file's size (it took 53 s and
2.5 GB on a million rows when the whole file was read first).

    .venv/bin/python perf/data_limit.py [--smoke]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import tracemalloc
from pathlib import Path

from testtime.benchmarks import benchmark_for


def write_files(folder: Path, rows: int) -> list[Path]:
    jsonl, csv = folder / "rows.jsonl", folder / "rows.csv"
    with jsonl.open("w") as j, csv.open("w") as c:
        c.write("id,question,answer\n")
        for i in range(rows):
            question = f"What is {i} + 1? " + "x" * 40
            j.write(json.dumps({"id": f"q{i}", "question": question, "answer": str(i + 1)}) + "\n")
            c.write(f"q{i},{question},{i + 1}\n")
    return [jsonl, csv]


def measure(path: Path, limit: int | None) -> tuple[float, float, int]:
    tracemalloc.start()
    started = time.perf_counter()
    benchmark = benchmark_for(str(path), limit=limit)
    problems, _ = benchmark.load()
    benchmark.describe()  # the sha256 of the whole file
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return seconds, peak / 2**20, len(problems)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="a tiny size, to prove the script still runs (CI)")
    args = parser.parse_args()
    rows = 2_000 if args.smoke else 1_000_000
    with tempfile.TemporaryDirectory() as folder:
        files = write_files(Path(folder), rows)
        print(f"{'file':10} {'rows':>9} {'limit':>6} {'problems':>9} {'seconds':>8} {'peak MiB':>9}")
        for path in files:
            for limit in (None, 3):
                seconds, peak, problems = measure(path, limit)
                shown = "-" if limit is None else str(limit)
                print(f"{path.suffix:10} {rows:9,d} {shown:>6} {problems:9,d} {seconds:8.2f} {peak:9.1f}")


if __name__ == "__main__":
    main()
