"""`testtime ablate depth-width`: TRT over widths K at depth T, majority up to n, RSA — one grid, one ledger.

Work is reused: one TRT run per K gives every depth t ≤ T from its per-round records, one majority run at the
largest n gives every smaller k by unbiased subsampling. Each sub-run is an ordinary run directory inside
`--out`, so the grid resumes like any run and `testtime report` reads its parts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testtime.core.errors import UserError
from testtime.experiments.curves import Point, plot, run_points
from testtime.methods.plan import Domain
from testtime.methods.trt.method import DEFAULT_SAMPLING as TRT_SAMPLING
from testtime.run.build import build_method, plan_of
from testtime.run.execute import execute
from testtime.run.lifecycle import create_or_resume, finished_run
from testtime.run.observer import QuietObserver, RunObserver
from testtime.run.settings import RunSettings


@dataclass(frozen=True)
class Grid:
    """One depth × width grid: the shared settings (`base`, with one budget for the whole grid) and the axes.
    `rsa`: the RSA method's own options (its defaults where unset), or None to leave it out; `ttrl`: TTRL's
    options, for one trained run placed at all its tokens (it samples by its own settings), or None."""

    base: RunSettings
    rounds: int
    widths: list[int]
    majority_n: int
    rsa: dict[str, Any] | None = None
    trt_options: dict[str, Any] = field(default_factory=dict)
    ttrl: dict[str, Any] | None = None

    def sub_runs(self) -> dict[str, RunSettings]:
        """Sub-run name → its settings."""
        base = self.base
        runs = {
            f"trt-K{k}": base.model_copy(
                update={
                    "method": "trt",
                    "method_options": {**self.trt_options, "rounds": str(self.rounds), "rollouts": str(k)},
                }
            )
            for k in self.widths
        }
        # The majority samples as TRT's solvers do (TRT's defaults where no flag is given), so the two compare.
        trt = TRT_SAMPLING
        solver = {
            "temperature": trt.temperature if base.temperature is None else base.temperature,
            "max_tokens": trt.max_tokens if base.max_tokens is None else base.max_tokens,
        }
        runs["majority"] = base.model_copy(
            update={"method": "majority", "n": self.majority_n, "method_options": {}, **solver}
        )
        if self.rsa is not None:
            runs["rsa"] = base.model_copy(update={"method": "rsa", "method_options": dict(self.rsa)})
        if self.ttrl is not None:
            own_sampling = {"temperature": None, "top_p": None, "max_tokens": None}
            runs["ttrl"] = base.model_copy(update={"method": "ttrl", "method_options": dict(self.ttrl), **own_sampling})
        return runs


def planned_calls(settings: RunSettings, problems: int, domain: Domain = "math") -> int:
    """What a sub-run must cost, by the method's own construction: the budget the grid promises."""
    return problems * (plan_of(build_method(settings), settings, domain).calls or 0)


def depth_width(
    grid: Grid, out: Path, observe: Callable[[], RunObserver] = QuietObserver, log: Any = print
) -> tuple[list[Point], list[Path]]:
    """The grid; `observe` makes each sub-run's progress observer. The base's `max_cost` and `max_tokens_total`
    are one budget for the whole grid, each sub-run given what the ones before it left (a grid that runs out
    stops cleanly and resumes with a larger one)."""
    if not grid.widths or min(grid.widths) < 1 or grid.rounds < 1 or grid.majority_n < 1:
        raise UserError("ablate needs rounds >= 1, widths >= 1 and --majority-n >= 1")
    out.mkdir(parents=True, exist_ok=True)
    points: list[Point] = []
    spent_cost, spent_tokens = 0.0, 0
    for name, settings in grid.sub_runs().items():
        path = out / name
        left = settings.model_copy(
            update={
                "max_cost": None if settings.max_cost is None else max(settings.max_cost - spent_cost, 1e-9),
                "max_tokens_total": None
                if settings.max_tokens_total is None
                else max(settings.max_tokens_total - spent_tokens, 1),
            }
        )
        finished = finished_run(path, left)
        if finished is not None:
            log(f"{name}: done, reusing {path}")
            summary = finished
        else:
            log(f"{name}: {'resuming' if (path / 'config.json').is_file() else 'running'} {path}")
            summary = execute(create_or_resume(left, path), observe())
        spent_cost += summary.ledger.known_cost_usd
        spent_tokens += summary.ledger.tokens
        if summary.stopped:
            raise UserError(f"the grid's budget ran out in {name} ({summary.stopped}); resume with a larger one")
        points += run_points(path)
    (out / "grid.json").write_text(json.dumps([p.model_dump() for p in points], indent=2) + "\n")
    header = "series,rollouts,tokens,accuracy,ci_low,ci_high,problems\n"
    rows = "".join(
        f"{p.series},{p.rollouts},{p.tokens:.1f},{p.accuracy:.4f},{p.ci_low:.4f},{p.ci_high:.4f},{p.problems}\n"
        for p in points
    )
    (out / "grid.csv").write_text(header + rows)
    images = plot(points, out, f"{grid.base.bench} · {grid.base.model}")
    return points, images
