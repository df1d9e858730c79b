"""`testtime ablate depth-width`: TRT over widths K at depth T, majority up to n, RSA — one grid, one ledger.

Work is reused: one TRT run per K gives every depth t ≤ T from its per-round records, one majority run at the
largest n gives every smaller k by unbiased subsampling. Each sub-run is an ordinary run directory inside
`--out`, so the grid resumes like any run and `testtime report` reads its parts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from testtime.core.errors import UserError
from testtime.core.rundir import RunDir
from testtime.experiments.config import RunConfig
from testtime.experiments.curves import Point, plot, run_points
from testtime.experiments.run import execute, start_run


def plan(
    base: dict[str, Any], rounds: int, widths: list[int], majority_n: int, rsa: tuple[int, int, int] | None
) -> dict[str, RunConfig]:
    """Sub-run name → its configuration."""
    runs = {
        f"trt-K{k}": RunConfig(**base, method="trt", method_options={"rounds": str(rounds), "rollouts": str(k)})
        for k in widths
    }
    runs["majority"] = RunConfig(**base, method="majority", n=majority_n)
    if rsa is not None:
        n, k, t = rsa
        runs["rsa"] = RunConfig(
            **base, method="rsa", method_options={"population": str(n), "aggregate": str(k), "steps": str(t)}
        )
    return runs


def planned_calls(config: RunConfig, problems: int) -> int:
    """What a sub-run must cost on math, by construction: the budget the grid promises."""
    options = config.method_options
    if config.method == "trt":
        return problems * (1 + int(options["rounds"]) * (int(options["rollouts"]) + 1))
    if config.method == "rsa":
        return problems * int(options["population"]) * int(options["steps"])
    return problems * (config.n or 1)


def depth_width(
    base: dict[str, Any],
    out: Path,
    rounds: int,
    widths: list[int],
    majority_n: int,
    rsa: tuple[int, int, int] | None,
    progress: bool = True,
    log: Any = print,
) -> tuple[list[Point], list[Path]]:
    if not widths or min(widths) < 1 or rounds < 1 or majority_n < 1:
        raise UserError("ablate needs rounds >= 1, widths >= 1 and --majority-n >= 1")
    out.mkdir(parents=True, exist_ok=True)
    points: list[Point] = []
    for name, config in plan(base, rounds, widths, majority_n, rsa).items():
        path = out / name
        summary = path / "summary.json"
        if summary.exists() and json.loads(summary.read_text()).get("complete"):
            log(f"{name}: done, reusing {path}")
        elif (path / "config.json").exists():
            log(f"{name}: resuming {path}")
            execute(RunDir.open_existing(path), progress=progress)
        else:
            log(f"{name}: running")
            run, parts = start_run(config, path)
            execute(run, parts=parts, progress=progress)
        points += run_points(path)
    (out / "grid.json").write_text(json.dumps([p.model_dump() for p in points], indent=2) + "\n")
    header = "series,rollouts,tokens,accuracy,ci_low,ci_high,problems\n"
    rows = "".join(
        f"{p.series},{p.rollouts},{p.tokens:.1f},{p.accuracy:.4f},{p.ci_low:.4f},{p.ci_high:.4f},{p.problems}\n"
        for p in points
    )
    (out / "grid.csv").write_text(header + rows)
    images = plot(points, out, f"{base['bench']} · {base['model']}")
    return points, images
