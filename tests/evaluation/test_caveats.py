"""A run that measured less than it seems says so at the start (greedy samples) and in its summary (greedy
samples; every sample cut at max_tokens; no sample with an answer), each with its fix."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testtime.models.mock_server import MockChatServer

Cli = Callable[..., Any]


def _run(cli: Cli, out: Path, upstream: str, *args: str) -> tuple[Any, dict[str, Any]]:
    done = cli("run", "--bench", "arith", "--limit", "3", "--model", "openai:mock", "--api-base", upstream,
               "--out", str(out), *args)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done, json.loads((out / "summary.json").read_text())


def test_greedy_samples_are_said_at_the_start_and_kept_in_the_summary(testtime_cli: Cli, tmp_path: Path) -> None:
    with MockChatServer() as upstream:
        greedy, summary = _run(testtime_cli, tmp_path / "greedy", upstream.url, "--n", "4", "--temperature", "0")
        single, alone = _run(
            testtime_cli, tmp_path / "single", upstream.url, "--method", "single", "--temperature", "0"
        )
        sampled, fine = _run(testtime_cli, tmp_path / "sampled", upstream.url, "--n", "4")
    assert "4 samples per problem at temperature 0 are 4 copies of one answer" in greedy.stderr
    assert summary["warnings"] == [
        "4 samples per problem at temperature 0 are 4 copies of one answer: the selection among them measures "
        "nothing (sample with --temperature > 0, or use --method single)"
    ]
    assert alone["warnings"] == [] and fine["warnings"] == []  # one greedy sample, or sampled ones, are fine
    assert "copies of one answer" not in single.stderr + sampled.stderr


@pytest.mark.parametrize(
    ("method", "calls"),
    [
        (("--method", "rsa", "--method-opt", "population=4", "--method-opt", "steps=2"), 8),
        (("--method", "trt", "--rounds", "2"), 0),
    ],
)
def test_greedy_rollouts_of_rsa_and_trt_are_said_too(
    testtime_cli: Cli, tmp_path: Path, method: tuple[str, ...], calls: int
) -> None:
    with MockChatServer() as upstream:
        done, summary = _run(testtime_cli, tmp_path / "greedy", upstream.url, *method, "--temperature", "0")
    # (the mock writes no JSON, so TRT also warns that its knowledge list stayed empty: a warning of its own)
    [warning] = [w for w in summary["warnings"] if "temperature 0" in w]
    assert "model calls per problem with the solver at temperature 0" in warning
    assert warning in done.stderr
    if calls:
        assert warning.startswith(f"{calls} model calls")


@pytest.mark.parametrize(
    ("reply", "args", "says"),
    [
        (lambda messages: "I would rather not say.", (), "no sample gave an answer"),
        (lambda messages: "Let me think about this at length " * 20, ("--max-tokens", "8"), "every sample was cut"),
    ],
)
def test_a_run_that_measured_nothing_names_the_fix(
    testtime_cli: Cli, tmp_path: Path, reply: Callable[[Any], str], args: tuple[str, ...], says: str
) -> None:
    with MockChatServer(reply=reply) as upstream:
        done, summary = _run(testtime_cli, tmp_path / "run", upstream.url, "--n", "2", *args)
    assert any(w.startswith(says) for w in summary["warnings"]), summary["warnings"]
    assert says in done.stdout + done.stderr  # under the table too


def test_a_truncation_warning_names_the_flag_the_method_takes() -> None:
    """TTRL refuses --max-tokens: its warning names --method-opt max_response=N; every other method's, --max-tokens."""
    from testtime.core.records import Candidate
    from testtime.core.results import ResultRecord
    from testtime.evaluation.caveats import measured_nothing

    cut = Candidate(index=0, text="...", answer=None, finish_reason="length")
    grading = {"correct": False, "status": "no_answer", "graded_answer": None}
    records = [ResultRecord(problem_id="p", prediction=None, candidates=(cut,), **grading)]
    assert "raise --method-opt max_response=N" in measured_nothing(records, "ttrl")[0]
    assert "raise --max-tokens" in measured_nothing(records, "majority")[0]


def test_the_judge_warning_says_what_fell_back() -> None:
    """USC's half-failures (the judge's pick held, its grouping named no classes) are not answers chosen by words:
    the warning counts them apart and says only their confidence was measured by words."""
    from testtime.evaluation.caveats import judge_fell_back
    from testtime.evaluation.summary import LabelFreeSummary

    half = LabelFreeSummary(answer_rate=1.0, judged=4, judge_fell_back=1, judge_grouping_fell_back=1)
    [said] = judge_fell_back(half)
    assert "fell back to word overlap" not in said
    assert "1 of 4 judged selections kept the judge's choice but not its grouping" in said
    both = LabelFreeSummary(answer_rate=1.0, judged=4, judge_fell_back=3, judge_grouping_fell_back=1)
    [said] = judge_fell_back(both)
    assert "2 of 4 judged selections fell back to word overlap" in said and "1 of 4 judged selections kept" in said
    assert judge_fell_back(LabelFreeSummary(answer_rate=1.0, judged=4, judge_fell_back=0)) == []


def test_a_served_runs_adaptive_summary_names_each_rule_its_requests_ran() -> None:
    """A request may ask for its own rule ({"adaptive": {"rule": "exact"}}): the summary names each rule with its
    votes, not every vote under the server's."""
    from testtime.core.adaptive import AdaptiveStop
    from testtime.evaluation.scoring import adaptive_summary

    server = AdaptiveStop(rule="posterior", threshold=0.8, drawn=4, cap=16, reason="settled", confidence=0.9)
    own = AdaptiveStop(rule="exact", threshold=None, drawn=12, cap=16, reason="settled", confidence=1.0)
    summary = adaptive_summary([server, server, own])
    assert (summary.rule, summary.threshold) == ("posterior", 0.8) and summary.rules == {"posterior 0.8": 2, "exact": 1}
    assert adaptive_summary([server]).rules is None
