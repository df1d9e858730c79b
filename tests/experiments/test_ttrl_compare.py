"""`testtime ttrl compare`: the table of gains, TTRL minus each reward and each reward minus the controls paired
by problem, the share of the oracle's gain, bad input, and (slow) the command end to end on the embedded model."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testtime.core.errors import UserError
from testtime.core.results import ResultRecord, TTRLAudit
from testtime.experiments.ttrl_compare import DEFAULT_REWARDS, compare, report_lines, run_rewards
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
    rows = {row["reward"]: row for row in compare(tmp_path, ("majority", "random", "format"))}
    assert rows["majority"]["gain"].mean == pytest.approx(0.5)
    assert rows["random"]["gain"].mean == pytest.approx(1 / 12)
    assert (rows["format"]["gain"].mean, rows["format"]["gain"].ci_low, rows["format"]["gain"].ci_high) == (0, 0, 0)
    assert rows["random"]["ttrl_minus"].mean == pytest.approx(5 / 12)
    assert rows["random"]["ttrl_minus"].ci_low > 0  # better on four problems of six, worse on none
    assert "ttrl_minus" not in rows["majority"] and "minus_random" not in rows["random"]
    assert rows["majority"]["minus_random"].mean == pytest.approx(5 / 12)  # TTRL beyond the signal-free reward
    assert rows["majority"]["of_oracle"] is None  # no oracle among the rewards
    lines = report_lines(list(rows.values()))
    assert lines[0].startswith("reward") and lines[2].startswith("random") and "+0.417" in lines[2]
    assert rows["majority"]["minus_format"].mean == pytest.approx(0.5)  # the format control gained nothing here
    assert "this − format" in lines[0] and lines[1].count("+0.500") == 2  # the gain, and beyond format


def test_each_reward_is_read_as_a_share_of_the_oracles_gain(tmp_path: Path) -> None:
    base = [0.0, 0.0, 0.5, 0.0]
    _sub_run(tmp_path / "majority", base, [0.5, 0.5, 0.5, 0.5])  # gain 0.375
    _sub_run(tmp_path / "oracle", base, [1.0, 1.0, 1.0, 0.5])  # gain 0.75
    _sub_run(tmp_path / "random", base, list(base))
    rows = {row["reward"]: row for row in compare(tmp_path, ("majority", "oracle", "random"))}
    majority, oracle = rows["majority"]["of_oracle"].interval, rows["oracle"]["of_oracle"].interval
    assert majority.mean == pytest.approx(0.5) and (oracle.mean, oracle.ci_low, oracle.ci_high) == (1.0, 1.0, 1.0)
    # per problem the majority gained 0.5, 0.5, 0, 0.5 of the oracle's 1, 1, 0.5, 0.5: resampled together
    assert 0.0 < majority.ci_low < 0.5 < majority.ci_high < 1.0 and majority.interval == "paired_bootstrap"
    assert rows["random"]["of_oracle"].interval.mean == 0.0 and rows["random"]["of_oracle"].undefined == 0.0
    assert rows["oracle"]["uses_labels"] and not rows["majority"]["uses_labels"]
    assert rows["oracle"]["ttrl_minus"].mean == pytest.approx(-0.375)
    assert rows["majority"]["health"] == {"collapse_alarms": 0, "final_entropy": None, "extinct_at_last_visit": None}
    printed = "\n".join(report_lines(list(rows.values())))
    assert "oracle (labels)" in printed and "0.50 [" in printed  # the share, with its interval


def test_the_cli_default_is_every_reward_compare_knows() -> None:
    from testtime.cli.ttrl import compare_command

    assert inspect.signature(compare_command).parameters["rewards"].default == ",".join(DEFAULT_REWARDS)


def test_compare_refuses_a_set_without_ttrl_or_an_unknown_reward(tmp_path: Path) -> None:
    base = RunSettings(method="ttrl", bench="arith", model="hf:smollm2-135m")
    with pytest.raises(UserError, match="include the majority reward"):
        run_rewards(base, tmp_path, ["random", "format"])
    with pytest.raises(UserError, match="unknown ttrl reward 'truth'"):
        run_rewards(base, tmp_path, ["majority", "truth"])
    assert not any(tmp_path.iterdir())  # nothing trained, nothing written


def test_the_cli_refuses_a_reward_option(testtime_cli: Callable[..., Any], tmp_path: Path) -> None:
    done = testtime_cli("ttrl", "compare", "--out", str(tmp_path / "c"), "--method-opt", "reward=random")
    assert done.returncode == 2 and "choose them with --rewards" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_compare_trains_majority_and_the_oracle_at_identical_settings(
    testtime_cli: Callable[..., Any], tmp_path: Path, scripted_model: str
) -> None:
    """One step each on the scripted model (it answers 1 or 2, so sums of 1 and 2 make the oracle's rewards
    differ): the oracle trains on exactly what the labels grade correct, on the same samples the vote saw, and
    every reader of its run says it used labels; report never pairs it."""
    import json
    import re

    data = tmp_path / "sums.jsonl"
    rows = [(0, 1), (1, 1), (2, 0), (0, 2)]
    data.write_text(
        "".join(json.dumps({"question": f"What is {a} + {b}?", "answer": str(a + b)}) + "\n" for a, b in rows)
    )
    out = tmp_path / "cmp"
    args = ["ttrl", "compare", "--out", str(out), "--rewards", "majority,oracle", "--bench", str(data)]
    args += ["--model", scripted_model]
    for option in ("prompts_per_step=2", "mini_batch_prompts=2", "n_vote=4", "n_train=4", "eval_samples=2"):
        args += ["--method-opt", option]
    done = testtime_cli(*args, "--steps", "1", "--quiet", timeout=1400)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"^oracle \(labels\)\s+4 ", done.stdout, re.M) and re.search(r"^majority\s+4 ", done.stdout, re.M)

    def votes(reward: str) -> list[dict[str, Any]]:
        lines = (out / reward / "ttrl" / "steps.jsonl").read_text().splitlines()
        return [v for line in lines for v in json.loads(line).get("votes", [])]

    statements = {
        json.loads(line)["id"]: json.loads(line)["statement"]
        for line in (out / "oracle" / "problems.jsonl").read_text().splitlines()
    }
    assert any(r == 1.0 for v in votes("oracle") for r in v["rewards"])  # the labels reached the reward
    for majority, oracle in zip(votes("majority"), votes("oracle"), strict=True):
        assert oracle["answers"] == majority["answers"]  # the same samples: only the reward differs
        assert oracle["majority_rewards"] == majority["rewards"]
        a, b = map(int, re.findall(r"\d+", statements[oracle["problem_id"]]))
        assert oracle["rewards"] == [1.0 if answer == str(a + b) else 0.0 for answer in oracle["answers"]]
    for reward, uses in (("majority", False), ("oracle", True)):
        assert json.loads((out / reward / "summary.json").read_text())["uses_labels"] is uses
        assert json.loads((out / reward / "config.json").read_text())["effective"]["uses_labels"] is uses
    report = testtime_cli("report", str(out), "--json", "--out", str(tmp_path / "report"))
    rows = {Path(r["run"]).name: r for r in json.loads(report.stdout)["runs"]}
    assert rows["oracle"]["uses_labels"] and "uses labels" in rows["oracle"]["majority_same_tokens"]["none"]
    assert not rows["majority"]["uses_labels"]
    from testtime.experiments.runs import run_rows
    from testtime.experiments.viewer import load
    from testtime.experiments.viewer.data import index

    majority_page, oracle_page = (index(r) for r in load([out / "majority", out / "oracle"]))
    assert oracle_page["uses_labels"] and not majority_page["uses_labels"]  # the page's banner
    assert {r["run"]: r["uses_labels"] for r in run_rows([out])} == {"majority": False, "oracle": True}
