"""`ablate depth-width` spends exactly the budget it promises, reuses work, and `report` compares at equal budget."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testtime.core.ledger import read_entries
from testtime.experiments.ablate import Grid, depth_width, planned_calls
from testtime.run import lifecycle
from testtime.run.execute import execute
from testtime.run.settings import RunSettings

BASE = RunSettings(
    method="majority", bench="arith", model="fake:echo", limit=3, temperature=0.7, max_tokens=64, concurrency=8
)
RSA = {"population": "4", "aggregate": "2", "steps": "3"}
GRID = Grid(base=BASE, rounds=3, widths=[1, 2], majority_n=8, rsa=RSA)


def _run_grid(out: Path) -> tuple[list[Any], list[Path]]:
    return depth_width(GRID, out, log=lambda *_: None)


def _small_grid(budget: int) -> Grid:
    rsa = {"population": "2", "aggregate": "2", "steps": "2"}
    return Grid(
        base=BASE.model_copy(update={"max_tokens_total": budget}), rounds=2, widths=[1, 2], majority_n=4, rsa=rsa
    )


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Any]]:
    out = tmp_path_factory.mktemp("grid")
    points, images = _run_grid(out)
    assert all(image.stat().st_size > 1000 for image in images)
    return out, points


def test_every_sub_run_costs_exactly_what_the_grid_planned(grid: tuple[Path, list[Any]]) -> None:
    out, _ = grid
    for name, config in GRID.sub_runs().items():
        paid = [e for e in read_entries(out / name / "ledger.jsonl") if not e.cached]
        assert len(paid) == planned_calls(config, problems=3), name


def test_points_sit_at_the_promised_rollouts(grid: tuple[Path, list[Any]]) -> None:
    _, points = grid
    by_series: dict[str, list[float]] = {}
    for p in points:
        by_series.setdefault(p.series, []).append(p.rollouts)
    assert by_series["trt K=1"] == [1, 2, 3] and by_series["trt K=2"] == [2, 4, 6]
    assert by_series["majority"] == [1, 2, 4, 8] and by_series["rsa N=4 K=2"] == [4, 8, 12]
    tokens = [p.tokens for p in points if p.series == "trt K=2"]
    assert tokens == sorted(tokens) and tokens[0] > 0  # cumulative, from the ledger


def test_a_second_invocation_reuses_every_run(grid: tuple[Path, list[Any]]) -> None:
    out, points = grid
    before = {name: len((out / name / "ledger.jsonl").read_text().splitlines()) for name in ("trt-K1", "majority")}
    again, _ = _run_grid(out)
    assert [p.model_dump() for p in again] == [p.model_dump() for p in points]
    assert before == {name: len((out / name / "ledger.jsonl").read_text().splitlines()) for name in before}


def test_report_puts_each_method_beside_majority_at_its_budget(
    grid: tuple[Path, list[Any]], tmp_path: Path, testtime_cli: Callable[..., Any]
) -> None:
    out, _ = grid
    result = testtime_cli(
        "report",
        str(out / "trt-K2"),
        str(out / "rsa"),
        str(out / "majority"),
        "--json",
        "--out",
        str(tmp_path / "report"),
    )
    assert result.returncode == 0, result.stderr
    rows = {row["method"]: row for row in json.loads(result.stdout)["runs"]}
    rollouts, tokens = rows["trt"]["majority_same_rollouts"], rows["trt"]["majority_same_tokens"]
    assert rollouts["budget"] == "solver rollouts" and rollouts["k"] == 6  # T·K solver samples
    # TRT's calls beyond its solvers and its longer prompts make majority at k = T·K the cheaper: never "same"
    assert (
        not rollouts["exact_budget"] and rollouts["baseline_tokens_per_problem"] < rollouts["method_tokens_per_problem"]
    )
    assert tokens["budget"] == "tokens" and tokens["k"] > 6  # what TRT's tokens buy in samples (capped at n)
    assert rows["rsa"]["majority_same_rollouts"]["k"] == 8 and not rows["rsa"]["majority_same_rollouts"]["exact_budget"]
    assert rows["majority"]["majority_same_rollouts"] is None and rows["majority"]["majority_same_tokens"] is None
    assert len(rows["trt"]["provenance"]) == 3 and (tmp_path / "report" / "comparison.png").exists()


def test_report_on_an_unfinished_run_is_a_clear_error(tmp_path: Path, testtime_cli: Callable[..., Any]) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"run": {"method": "single", "bench": "arith", "model": "fake:"}}))
    result = testtime_cli("report", str(run))
    assert result.returncode == 2 and "no summary.json yet" in result.stderr


def test_one_budget_covers_the_whole_grid_and_a_larger_one_resumes(tmp_path: Path) -> None:
    from testtime.core.errors import UserError

    out = tmp_path / "grid"
    with pytest.raises(UserError, match="the grid's budget ran out"):
        depth_width(_small_grid(400), out, log=lambda *_: None)
    spent = sum(
        e.prompt_tokens + e.completion_tokens
        for p in out.iterdir()
        if p.is_dir()
        for e in read_entries(p / "ledger.jsonl")
    )
    assert spent < 400 + 200  # stopped near the budget (calls in flight land), not after the whole grid
    points, _ = depth_width(_small_grid(10**7), out, log=lambda *_: None)
    assert {p.series for p in points} == {
        "trt K=1",
        "trt K=2",
        "majority",
        "rsa N=2 K=2",
        "rsa N=2 K=2 pass@1",
    }


def test_ablate_takes_runs_sampling_auth_and_budget_flags(testtime_cli: Callable[..., Any], tmp_path: Path) -> None:
    shown = testtime_cli("ablate", "depth-width", "--help")
    for flag in (
        "--max-cost",
        "--max-tokens-total",
        "--api-key-env",
        "--top-p",
        "--method-opt",
        "--rsa-opt",
        "--no-rsa",
    ):
        assert flag in shown.stdout, flag
    bad = testtime_cli(
        "ablate", "depth-width", "--model", "fake:echo", "--rsa-opt", "aggregate=20", "--out", str(tmp_path / "g")
    )
    assert bad.returncode == 2 and "aggregate <= population" in bad.stderr and not (tmp_path / "g").exists()


def test_report_pairs_only_runs_with_the_same_settings(grid: tuple[Path, list[Any]], tmp_path: Path) -> None:
    from testtime.experiments.report import build_report

    out, _ = grid
    hotter = tmp_path / "majority-hot"
    execute(lifecycle.create(BASE.model_copy(update={"temperature": 1.0, "n": 8}), hotter))
    rows = {Path(r.run).name: r for r in build_report([out / "trt-K2", hotter]).runs}
    assert "solver temperature 1.0 vs 0.7" in (rows["trt-K2"].majority_same_tokens.none or "")  # never compared
    rows = {Path(r.run).name: r for r in build_report([out / "trt-K2", hotter, out / "majority"]).runs}
    base = rows["trt-K2"].majority_same_tokens
    assert (
        base.run.endswith("majority") and base.difference is not None and base.difference.interval == "paired_bootstrap"
    )


def test_binary_accuracy_has_a_wilson_interval_even_at_zero() -> None:
    from testtime.evaluation.metrics import mean_ci

    none_right = mean_ci([0.0, 0.0, 0.0])
    assert none_right is not None and none_right.interval == "wilson"
    assert none_right.mean == 0.0 and none_right.ci_low == 0.0 and none_right.ci_high > 0.4  # 0/3 is no proof
    all_right = mean_ci([1.0] * 3)
    assert all_right is not None and all_right.ci_high == 1.0 and all_right.ci_low < 0.6


def test_ablate_points_use_wilson_for_accuracy_like_every_other_view(grid: tuple[Path, list[Any]]) -> None:
    """At 3 problems a bootstrap interval of 0/3 or 3/3 collapses to a point; the grid's must not."""
    from testtime.evaluation.metrics import wilson_ci

    _, points = grid
    trt = [p for p in points if p.series == "trt K=1"]
    for point in trt:
        low, high = wilson_ci(round(point.accuracy * point.problems), point.problems)
        assert (point.ci_low, point.ci_high) == pytest.approx((low, high))


def test_a_plot_legend_sits_beside_the_axes_not_over_the_points(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from testtime.experiments.curves import outside_legend

    figure, ax = plt.subplots()
    for series in ("majority", "trt", "rsa"):
        ax.plot([1, 2, 4, 8], [0.2, 0.5, 0.9, 1.0], marker="o", label=series)  # points up to the top right
    legend = outside_legend(ax)
    figure.savefig(tmp_path / "plot.png", bbox_inches="tight")
    renderer = figure.canvas.get_renderer()
    box, axes = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
    assert box.x0 >= axes.x1 and not box.overlaps(axes)
    plt.close(figure)
