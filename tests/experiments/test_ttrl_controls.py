"""`testtime ttrl controls`: the table of gains, TTRL minus each control paired by problem, and bad input."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testtime.core.errors import UserError
from testtime.core.results import ResultRecord, TTRLAudit
from testtime.experiments.ttrl_controls import compare, report_lines, run_controls
from testtime.run.directory import RunDir
from testtime.run.settings import RunSettings


def _sub_run(folder: Path, before: list[float], after: list[float]) -> None:
    run = RunDir.create(folder)
    run.config_path.write_text("{}")
    for i, (b, a) in enumerate(zip(before, after, strict=True)):
        run.append_result(
            ResultRecord(
                problem_id=f"p{i}",
                prediction=None,
                correct=a > 0.5,
                graded_answer=None,
                status="correct" if a > 0.5 else "wrong",
                sample_correct=(a >= 0.5, a >= 1.0),  # pass@1 0, 0.5 or 1 from two samples
                ttrl_audit=TTRLAudit(before_sample_correct=(b >= 0.5, b >= 1.0)),
            )
        )


def test_gains_and_ttrl_minus_each_control_are_paired_by_problem(tmp_path: Path) -> None:
    base = [0.0, 0.5, 0.5, 0.0, 0.5, 0.0]
    _sub_run(tmp_path / "majority", base, [1.0, 1.0, 0.5, 0.5, 1.0, 0.5])
    _sub_run(tmp_path / "random", base, [0.0, 0.5, 0.5, 0.5, 0.5, 0.0])
    _sub_run(tmp_path / "format", base, list(base))
    rows = {row["reward"]: row for row in compare(tmp_path)}
    assert rows["majority"]["gain"].mean == pytest.approx(0.5)
    assert rows["random"]["gain"].mean == pytest.approx(1 / 12)
    assert (rows["format"]["gain"].mean, rows["format"]["gain"].ci_low, rows["format"]["gain"].ci_high) == (0, 0, 0)
    assert rows["random"]["ttrl_minus"].mean == pytest.approx(5 / 12)
    assert rows["random"]["ttrl_minus"].ci_low > 0  # better on four problems of six, worse on none
    assert "ttrl_minus" not in rows["majority"]
    lines = report_lines(list(rows.values()))
    assert lines[0].startswith("reward") and lines[2].startswith("random") and "+0.417" in lines[2]


def test_controls_refuse_a_set_without_ttrl_or_an_unknown_reward(tmp_path: Path) -> None:
    base = RunSettings(method="ttrl", bench="arith", model="hf:smollm2-135m")
    with pytest.raises(UserError, match="include the majority reward"):
        run_controls(base, tmp_path, ["random", "format"])
    with pytest.raises(UserError, match="unknown ttrl reward 'oracle'"):
        run_controls(base, tmp_path, ["majority", "oracle"])
    assert not any(tmp_path.iterdir())  # nothing trained, nothing written


def test_the_cli_refuses_a_reward_option(testtime_cli: Callable[..., Any], tmp_path: Path) -> None:
    done = testtime_cli("ttrl", "controls", "--out", str(tmp_path / "c"), "--method-opt", "reward=random")
    assert done.returncode == 2 and "choose them with --rewards" in done.stderr and "Traceback" not in done.stderr
