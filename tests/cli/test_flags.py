"""A method's own flags and options, and selector choice, as a user types them on `testtime run`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

Cli = Callable[..., CompletedProcess[str]]
FAKE = ["--bench", "arith", "--limit", "2", "--model", "fake:echo", "--quiet"]


def method_config(out: Path) -> dict[str, object]:
    return json.loads((out / "config.json").read_text())["method"]


def test_a_methods_own_flags_are_accepted_and_recorded(testtime_cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "trt"
    done = testtime_cli(
        "run", "--method", "trt", "-T", "2", "--rollouts=3", "--no-strategies", *FAKE, "--out", str(out)
    )
    assert done.returncode == 0, done.stderr
    described = method_config(out)
    assert (described["rounds"], described["rollouts"], described["strategies"], described["knowledge"]) == (
        2,
        3,
        False,
        True,
    )
    assert described["selector"] == {"name": "exclusivity", "rule": "support"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--method", "majority", "--rounds", "3"],
            "--rounds is not an option of --method majority or --bench arith; it is an option of --method trt",
        ),
        (["--bench", "arith", "--difficulty", "hard"], "--difficulty is not an option of --method majority or --bench"),
        (
            ["--bench", "arith", "--bench-opt", "digit=3"],
            "benchmark arith does not take option 'digit'; did you mean digits?",
        ),
        (["--method", "rsa", "--population", "4"], "give it as --method-opt population=4"),
        (["--bench", "arith", "--digits=2"], "give it as --bench-opt digits=2"),
        (["--method", "trt", "--n", "4"], "--method trt does not use --n: it runs T rounds of K rollouts"),
        (["--method", "single", "--n", "4"], "--method single does not use --n"),
        (["--method", "trt", "-T"], "-T needs a value"),
        (["--method", "trt", "-T", "zero"], "trt option rounds"),
        (["--method", "majority", "--selector", "execution"], "selector execution cannot choose among math answers"),
        (["--method", "single", "--selector", "majority"], "--method single selects nothing"),
        (["--method", "majority", "--selector-opt", "tie_polcy=random"], "did you mean tie_policy?"),
        (["--method", "majority", "--selector", "coin"], "unknown selector 'coin'"),
        (["--method", "rsa", "--method-opt", "aggregate=9", "--method-opt", "population=4"], "aggregate <= population"),
    ],
)
def test_a_wrong_flag_is_one_line_that_says_what_to_use(
    testtime_cli: Cli, tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "run"
    done = testtime_cli("run", *args, *FAKE, "--out", str(out))
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not out.exists()  # refused before anything was written


def test_ttrl_refuses_a_temperature_it_would_ignore(testtime_cli: Cli, tmp_path: Path) -> None:
    done = testtime_cli(
        "run", "--method", "ttrl", "--temperature", "0.5", "--bench", "arith", "--out", str(tmp_path / "r")
    )
    assert done.returncode == 2 and "eval_temperature" in done.stderr, done.stderr


RANDOM_TIES = {"name": "majority", "tie_policy": "random", "weight": "count", "keep": 1.0}  # every option recorded


def test_selector_and_its_options_swap_and_are_recorded(testtime_cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "trt-majority"
    done = testtime_cli(
        "run", "--method", "trt", "-T", "1", "-K", "2", "--selector", "majority", "--selector-opt", "tie_policy=random",
        *FAKE, "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert method_config(out)["selector"] == RANDOM_TIES
    [record] = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()][:1]
    assert record["rounds"][0]["selection"]["selector"] == "majority"


def test_selector_options_given_as_method_options_still_reach_the_selector(testtime_cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "majority"
    done = testtime_cli("run", "--method", "majority", "--method-opt", "tie_policy=random", *FAKE, "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert method_config(out)["selector"] == RANDOM_TIES


def test_help_and_list_show_each_methods_options(testtime_cli: Cli) -> None:
    shown = testtime_cli("run", "--help")
    assert shown.returncode == 0 and "--rounds/-T" in shown.stdout and "--preset" in shown.stdout
    listed = testtime_cli("list")
    assert listed.returncode == 0
    assert "rounds (--rounds/-T)" in listed.stdout and "selector execution" in listed.stdout
