"""`testtime view` on a large run: 500 problems × 64 samples (majority on `arith`, the scripted model), as the
issue asks. Measures, in one run: writing the run, loading it, building the static page (and its size), the
browser's time until the page is ready with one problem open (static and served), and the served detail's
latency.

    .venv/bin/python perf/viewer.py [--problems 500] [--samples 64]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from testtime.experiments.viewer import Viewer, load, static_page


def timed(fn):  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - started


def browser_ready_s(chromium: str, url: str) -> float:
    """Seconds until the dumped page carries data-ready (headless start included: about a second)."""
    started = time.perf_counter()
    done = subprocess.run(
        [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=20000", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert 'data-ready="1"' in done.stdout, done.stderr[-500:]
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=500)
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--smoke", action="store_true", help="a tiny size, to prove the script still runs (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.problems, args.samples = 20, 4
    chromium = shutil.which("chromium")
    folder = Path(tempfile.mkdtemp(prefix="testtime-viewer-perf-"))
    run = folder / "run"
    command = [sys.executable, "-m", "testtime.cli", "run", "--method", "majority", "--bench", "arith"]
    command += ["--bench-opt", f"size={args.problems}", "--n", str(args.samples), "--model", "fake:echo"]
    _, write_s = timed(
        lambda: subprocess.run([*command, "--quiet", "--out", str(run)], check=True, capture_output=True)
    )
    runs, load_s = timed(lambda: load([run]))
    page, static_s = timed(lambda: static_page(runs))
    page_file = folder / "view.html"
    page_file.write_text(page)
    rows = [
        ("write the run (CLI, scripted model)", f"{write_s:.1f} s"),
        ("load it", f"{load_s:.2f} s"),
        ("build the static page", f"{static_s:.2f} s, {len(page) / 2**20:.1f} MiB"),
    ]
    with Viewer(runs) as viewer:
        latencies = []
        for i in range(20):
            url = f"{viewer.url}api/detail?run=0&problem=arith-d2-{i}"
            _, seconds = timed(lambda url=url: urllib.request.urlopen(url).read())
            latencies.append(seconds)
        rows.append(("served detail, median of 20", f"{statistics.median(latencies) * 1000:.0f} ms"))
        if chromium:
            rows.append(
                (
                    "browser ready, served",
                    f"{browser_ready_s(chromium, viewer.url + '#run=0&problem=arith-d2-7'):.1f} s",
                )
            )
    if chromium:
        rows.append(
            (
                "browser ready, static",
                f"{browser_ready_s(chromium, page_file.as_uri() + '#run=0&problem=arith-d2-7'):.1f} s",
            )
        )
    print(f"testtime view: {args.problems} problems × {args.samples} samples")
    for name, value in rows:
        print(f"{name:38} {value}")
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
