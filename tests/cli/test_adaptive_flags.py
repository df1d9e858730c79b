"""Adaptive flags that cannot mean anything are refused in one line, before a run directory exists: a first wave
past the cap (--adaptive-min past --n, or 10^23), a window wider than the cap (never settles), a rule's flag
without --adaptive; a served request's rule the same way (a 400). The flags are the one `Adaptive` model's."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from tests.cli.test_hostile_edges import one_line_refusal
from testtime.core.adaptive import FLAGS, Adaptive

Cli = Callable[..., CompletedProcess[str]]
RUN = ("run", "--bench", "arith", "--limit", "2", "--model", "fake:echo", "--n", "8")


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--adaptive", "--adaptive-min", "9"], ["--adaptive-min", "past the cap of 8"]),
        (["--adaptive", "--adaptive-min", str(10**23)], ["--adaptive-min", "past the cap of 8"]),
        (["--adaptive", "--adaptive-rule", "window", "--adaptive-threshold", "12"], ["wider than the cap of 8"]),
        (["--adaptive-threshold", "0.9"], ["--adaptive-threshold", "add --adaptive"]),
        (["--adaptive-rule", "exact"], ["--adaptive-rule", "add --adaptive"]),
        (["--adaptive-wave", "3"], ["--adaptive-wave", "add --adaptive"]),
        (["--adaptive", "--adaptive-wave", "0"], ["wave"]),
    ],
)
def test_an_adaptive_flag_that_cannot_mean_anything_is_one_line(
    testtime_cli: Cli, tmp_path: Path, flags: list[str], words: list[str]
) -> None:
    out = tmp_path / "run"
    one_line_refusal(testtime_cli(*RUN, *flags, "--out", str(out)), *words)
    assert not out.exists()


def test_a_wave_given_on_the_command_line_is_the_runs(testtime_cli: Cli, tmp_path: Path) -> None:
    """Votes 1, 2, then 1s: split after the first wave of 2; settled (4 to 1) after a wave of 3, where waves of
    2 would have stopped at 4 samples (3 to 1)."""
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(["\\boxed{1}", "\\boxed{2}"] + ["\\boxed{1}"] * 6))
    out = tmp_path / "run"
    done = testtime_cli("run", "--bench", "arith", "--limit", "1", "--model", f"fake:file:{script}", "--n", "8",
                        "--concurrency", "1", "--adaptive", "--adaptive-wave", "3", "--adaptive-min", "2",
                        "--out", str(out), "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = json.loads((out / "results.jsonl").read_text().splitlines()[0])["adaptive"]
    assert record["drawn"] == 5 and record["reason"] == "settled"
    config = json.loads((out / "config.json").read_text())["run"]
    assert config["adaptive_wave"] == 3 and config["adaptive_min"] == 2


def test_every_field_of_the_rule_is_a_flag_with_its_models_help() -> None:
    from testtime.cli.shared_flags import SHARED

    for name, info in Adaptive.model_fields.items():
        annotation, default = SHARED[FLAGS[name]]
        option = annotation.__metadata__[0]
        assert default is None and option.help == info.description, name
