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
from testtime.experiments.run import build_method, execute, start_run


def plan(
    base: dict[str, Any],
    rounds: int,
    widths: list[int],
    majority_n: int,
    rsa: dict[str, Any] | None,
    trt_options: dict[str, Any] | None = None,
    ttrl: dict[str, Any] | None = None,
) -> dict[str, RunConfig]:
    """Sub-run name → its configuration. `rsa`: the RSA method's own options (its defaults where unset);
    `ttrl`: TTRL's options, for one trained run placed at all its tokens (it samples by its own settings)."""
    runs = {
        f"trt-K{k}": RunConfig(
            **base, method="trt", method_options={**(trt_options or {}), "rounds": str(rounds), "rollouts": str(k)}
        )
        for k in widths
    }
    runs["majority"] = RunConfig(**base, method="majority", n=majority_n)
    if rsa is not None:
        runs["rsa"] = RunConfig(**base, method="rsa", method_options=dict(rsa))
    if ttrl is not None:
        sampling = ("temperature", "top_p", "max_tokens")
        runs["ttrl"] = RunConfig(
            **{k: v for k, v in base.items() if k not in sampling}, method="ttrl", method_options=dict(ttrl)
        )
    return runs


def planned_calls(config: RunConfig, problems: int, domain: str = "math") -> int:
    """What a sub-run must cost, by the method's own construction: the budget the grid promises."""
    per_problem = build_method(config).planned_calls(domain, config.n)
    return problems * (per_problem or 0)


def depth_width(
    base: dict[str, Any],
    out: Path,
    rounds: int,
    widths: list[int],
    majority_n: int,
    rsa: dict[str, Any] | None,
    trt_options: dict[str, Any] | None = None,
    progress: bool = True,
    log: Any = print,
    ttrl: dict[str, Any] | None = None,
) -> tuple[list[Point], list[Path]]:
    """The grid. `base` may carry `max_cost` / `max_tokens_total`: one budget for the whole grid, each sub-run
    given what the ones before it left (a grid that runs out stops cleanly and resumes with a larger one)."""
    if not widths or min(widths) < 1 or rounds < 1 or majority_n < 1:
        raise UserError("ablate needs rounds >= 1, widths >= 1 and --majority-n >= 1")
    configs = plan(base, rounds, widths, majority_n, rsa, trt_options, ttrl)
    out.mkdir(parents=True, exist_ok=True)
    points: list[Point] = []
    spent_cost, spent_tokens = 0.0, 0
    for name, config in configs.items():
        path = out / name
        summary = path / "summary.json"
        left = config.model_copy(
            update={
                "max_cost": None if config.max_cost is None else max(config.max_cost - spent_cost, 1e-9),
                "max_tokens_total": None
                if config.max_tokens_total is None
                else max(config.max_tokens_total - spent_tokens, 1),
            }
        )
        if summary.exists() and json.loads(summary.read_text()).get("complete"):
            log(f"{name}: done, reusing {path}")
            result = json.loads(summary.read_text())
        elif (path / "config.json").exists():
            log(f"{name}: resuming {path}")
            run = RunDir.open_existing(path)
            saved = run.read_config()
            saved["run"].update(max_cost=left.max_cost, max_tokens_total=left.max_tokens_total)
            run.write_config(saved)
            result = execute(run, progress=progress)
        else:
            log(f"{name}: running")
            run, parts = start_run(left, path)
            result = execute(run, parts=parts, progress=progress)
        spent_cost += result["ledger"].get("cost_usd", 0.0)
        spent_tokens += result["ledger"].get("tokens", 0)
        if result.get("stopped"):
            raise UserError(f"the grid's budget ran out in {name} ({result['stopped']}); resume with a larger one")
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
