"""--adaptive on a majority vote: the samples it draws are the fixed run's first ones (seed for seed), it stops when
its rule says the vote is settled, every result says why it stopped, a resume pays nothing again, and a method or
selector with no vote to stop refuses it in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.helpers import solve_with
from testtime.core.errors import UserError
from testtime.core.records import Message, Problem, SamplingParams
from testtime.core.seeds import problem_rng
from testtime.methods import METHODS, load_methods
from testtime.methods.plan import RunBase
from testtime.models.fake import FakeModel
from testtime.run.settings import RunSettings

TESTTIME = str(Path(sys.executable).with_name("testtime"))


def settles(messages: Sequence[Message], params: SamplingParams) -> str:
    """A model sure of most sums: 9 samples in 10 box the sum, the rest a wrong number, by the sample's own seed."""
    rng = problem_rng(params.seed or 0, messages[-1].content)
    a, b = map(int, messages[-1].content.split("What is ")[1].rstrip("?").split(" + "))
    return f"\\boxed{{{a + b if rng.random() < 0.9 else a + b + 1 + rng.randrange(5)}}}"


def test_an_adaptive_vote_is_the_fixed_votes_first_samples(tmp_path: Path) -> None:
    load_methods()
    problem = Problem(id="p", domain="math", statement="What is 12 + 30?")
    fixed_method, adaptive_method = METHODS.create("majority"), METHODS.create("majority")
    base = RunBase(n=16, seed=3)
    adaptive_base = RunBase(n=16, seed=3, adaptive=RunSettings(method="majority", bench="arith", model="fake:",
                                                               adaptive=True).stopping())  # fmt: skip
    fixed, _ = solve_with(fixed_method, FakeModel(settles), problem, base=base)
    adaptive, ledger = solve_with(adaptive_method, FakeModel(settles), problem, base=adaptive_base)
    assert adaptive.adaptive is not None and adaptive.adaptive.drawn == len(adaptive.candidates) < 16
    drawn = adaptive.adaptive.drawn
    assert [c.text for c in adaptive.candidates] == [c.text for c in fixed.candidates[:drawn]]
    assert ledger.totals.calls == drawn and adaptive.prediction == fixed.prediction == "42"


def test_every_result_says_why_its_vote_stopped_and_a_resume_pays_nothing(tmp_path: Path) -> None:
    script = tmp_path / "settles.json"
    script.write_text(json.dumps(["\\boxed{7}"] * 9 + ["\\boxed{8}"]))
    out = tmp_path / "adaptive"
    args = ["run", "--bench", "arith", "--limit", "6", "--n", "16", "--model", f"fake:file:{script}", "--adaptive",
            "--out", str(out), "--quiet"]  # fmt: skip
    done = subprocess.run([TESTTIME, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 6 and all(line["adaptive"]["rule"] == "posterior" for line in lines)
    assert all(line["adaptive"]["reason"] in ("settled", "cap") for line in lines)
    summary = json.loads((out / "summary.json").read_text())["adaptive"]
    assert summary["samples"] == sum(line["adaptive"]["drawn"] for line in lines) <= 96 // 2
    assert json.loads((out / "config.json").read_text())["effective"]["adaptive"]["rule"] == "posterior"
    (out / "results.jsonl").write_text("")  # as if killed before any result was written
    again = subprocess.run([TESTTIME, "run", "--resume", str(out), "--quiet"], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert json.loads((out / "summary.json").read_text())["ledger"]["calls"] == summary["samples"]  # all cached


@pytest.mark.parametrize(
    ("method", "options", "says"),
    [
        ("trt", {}, "--method trt draws no vote to stop"),
        ("single", {}, "--method single draws no vote to stop"),
        ("majority", {"selector": "execution"}, "the execution selector weighs all the samples together"),
    ],
)
def test_a_method_or_selector_with_no_vote_to_stop_refuses_it(method: str, options: dict[str, str], says: str) -> None:
    from testtime.run.build import build_method, check_run_flags, plan_of

    settings = RunSettings(method=method, bench="pyfunc", model="fake:", adaptive=True, method_options=options)
    with pytest.raises(UserError, match=says):
        check_run_flags(settings, plan_of(build_method(settings), settings, "code"))


def test_a_threshold_its_rule_cannot_take_names_the_flag(tmp_path: Path) -> None:
    done = subprocess.run(
        [TESTTIME, "run", "--model", "fake:", "--adaptive", "--adaptive-rule", "window", "--adaptive-threshold",
         "0.9", "--out", str(tmp_path / "x")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "error: --adaptive-threshold: the window rule's threshold is a number of samples (2 or more), not 0.9"
    )


def test_report_sets_an_adaptive_run_beside_its_fixed_twin(tmp_path: Path) -> None:
    """A scripted model whose votes settle quickly: the adaptive run gives the fixed run's predictions for at
    most half its samples, and `report` pairs the two (accuracy difference by problem, tokens ratio)."""
    script = tmp_path / "settles.json"
    script.write_text(json.dumps(["\\boxed{7}"] * 9 + ["\\boxed{8}"]))
    common = ["--bench", "arith", "--limit", "8", "--n", "16", "--model", f"fake:file:{script}", "--concurrency", "1"]
    for name, extra in (("fixed", []), ("adaptive", ["--adaptive"])):
        done = subprocess.run(
            [TESTTIME, "run", *common, *extra, "--out", str(tmp_path / name), "--quiet"], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
    predictions = {
        name: [
            json.loads(line)["prediction"] for line in (tmp_path / name / "predictions.jsonl").read_text().splitlines()
        ]
        for name in ("fixed", "adaptive")
    }
    assert predictions["adaptive"] == predictions["fixed"]
    shown = subprocess.run(
        [TESTTIME, "report", str(tmp_path / "fixed"), str(tmp_path / "adaptive"), "--out", str(tmp_path / "report")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "adaptive adaptive vs fixed fixed on 8 problems: accuracy +0.000" in shown.stdout + shown.stderr
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    [paired] = [row["adaptive_vs_fixed"] for row in report["runs"] if row["adaptive_vs_fixed"]]
    assert paired["fixed_run"].endswith("fixed") and paired["samples_ratio"] <= 0.5
    assert paired["tokens_ratio"] <= 0.5 and paired["difference"]["mean"] == 0.0


def test_report_never_pairs_an_adaptive_run_with_a_fixed_run_of_another_seed(tmp_path: Path) -> None:
    """Paired by construction means seed for seed: a fixed run of another seed drew other samples."""
    common = ["--bench", "arith", "--limit", "4", "--n", "8", "--model", "fake:echo"]
    for name, extra in (("fixed", ["--seed", "1"]), ("adaptive", ["--adaptive"])):
        done = subprocess.run(
            [TESTTIME, "run", *common, *extra, "--out", str(tmp_path / name), "--quiet"], capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
    shown = subprocess.run(
        [TESTTIME, "report", str(tmp_path / "fixed"), str(tmp_path / "adaptive"), "--out", str(tmp_path / "report"),
         "--json"], capture_output=True, text=True,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    [paired] = [row["adaptive_vs_fixed"] for row in json.loads(shown.stdout)["runs"] if row["adaptive_vs_fixed"]]
    assert paired["fixed_run"] is None and "seed 1 vs 0" in paired["none"]
