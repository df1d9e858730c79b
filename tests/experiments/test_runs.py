"""Folders of runs as researchers read them: `view`, `report` and `runs` take a folder and find every run in
it (not what lies inside a run), and `testtime.load_runs` gives pandas one row per (run, problem) with the
predictions kept as text."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

import testtime
from testtime.core.errors import UserError
from testtime.experiments.runs import find_runs

Cli = Callable[..., CompletedProcess[str]]
ROWS = [{"id": "a", "problem": "Write 007 as it is.", "answer": "007"}, {"id": "b", "problem": "Say 5.", "answer": "6"}]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """runs/ with a labelled majority run, an unlabelled single run and, nested deeper, a replay of the first."""
    from tests.conftest import _run_cli
    from tests.helpers import write_jsonl

    root = tmp_path_factory.mktemp("collection")
    data = write_jsonl(root / "mine.jsonl", ROWS)
    unlabelled = write_jsonl(root / "plain.jsonl", [{"id": r["id"], "problem": r["problem"]} for r in ROWS])
    runs = root / "runs"
    for name, bench, method in (("maj", data, "majority"), ("one", unlabelled, "single")):
        done = _run_cli(
            "run", "--method", method, "--bench", str(bench), "--model", "fake:echo", "--quiet", "--out",
            str(runs / "grid" / name), "--bench-opt", "domain=math",  # "Say 5." unlabelled would be a chat
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    assert _run_cli("run", "--replay", str(runs / "grid" / "maj"), "--quiet").returncode == 0
    return runs


def test_a_folder_is_every_run_below_it_and_not_what_lies_inside_a_run(folder: Path) -> None:
    assert [p.name for p in find_runs([folder])] == ["maj", "one"]  # the replay belongs to "maj"
    assert find_runs([folder / "grid" / "one"]) == [folder / "grid" / "one"]
    (folder.parent / "empty").mkdir(exist_ok=True)
    with pytest.raises(UserError, match="holds no run directory"):
        find_runs([folder.parent / "empty"])
    with pytest.raises(UserError, match="neither a run directory nor a folder"):
        find_runs([folder / "nothing.txt"])


def test_load_runs_keeps_predictions_as_text_and_unlabelled_as_missing(folder: Path) -> None:
    pytest.importorskip("pandas")  # an extra's dependency (datasets brings it); CI has it
    frame = testtime.load_runs(folder)
    assert len(frame) == 4 and set(frame["run"]) == {"maj", "one"}
    maj = frame[frame["run"] == "maj"].set_index("problem_id")
    assert maj.loc["a", "prediction"] == "007"  # a number-looking answer stays text, leading zeros and all
    assert bool(maj.loc["a", "correct"]) is True and bool(maj.loc["b", "correct"]) is False
    assert maj.loc["a", "reference"] == "007" and maj.loc["b", "reference"] == "6"  # what each was graded against
    assert maj.loc["a", "confidence"] == 1.0 and maj.loc["a", "calls"] == 8
    one = frame[frame["run"] == "one"]
    # unlabelled; one sample: no evidence
    assert one["correct"].isna().all() and one["reference"].isna().all() and one["confidence"].isna().all()
    grid = frame.pivot(index="problem_id", columns="run", values="prediction")
    assert grid.shape == (2, 2)


def test_runs_lists_a_folder_and_writes_its_problems_as_csv(testtime_cli: Cli, folder: Path) -> None:
    listed = testtime_cli("runs", str(folder))
    assert listed.returncode == 0, listed.stderr
    assert "maj" in listed.stdout and "one" in listed.stdout and "majority" in listed.stdout
    written = testtime_cli("runs", str(folder), "--csv")
    rows = list(csv.DictReader(io.StringIO(written.stdout)))
    assert [(r["run"], r["problem_id"], r["prediction"]) for r in rows] == [
        ("maj", "a", "007"), ("maj", "b", "5"), ("one", "a", "007"), ("one", "b", "5"),
    ]  # fmt: skip
    assert rows[0]["correct"] == "True" and rows[2]["correct"] == ""
    assert testtime_cli("runs", str(folder / "nothing")).returncode == 2


def test_view_and_report_accept_a_folder_of_runs(testtime_cli: Cli, folder: Path, tmp_path: Path) -> None:
    page = tmp_path / "page.html"
    viewed = testtime_cli("view", str(folder), "--html", str(page))
    assert viewed.returncode == 0, viewed.stderr
    text = page.read_text()
    assert "maj" in text and "one" in text
    reported = testtime_cli("report", str(folder), "--out", str(tmp_path / "report"), "--json")
    assert reported.returncode == 0, reported.stderr
    assert [Path(row["run"]).name for row in json.loads(reported.stdout)["runs"]] == ["maj", "one"]


def test_the_printed_report_gives_every_baseline_its_interval(testtime_cli: Cli, tmp_path: Path) -> None:
    """A derived figure is printed with its interval: the baseline's maj@k and the run's paired difference."""
    for name, args in (("maj", ["--n", "8"]), ("trt", ["--method", "trt", "-T", "2", "-K", "2"])):
        done = testtime_cli("run", "--bench", "arith", "--limit", "6", "--model", "fake:", "--quiet",
                            "--temperature", "0.6", "--max-tokens", "64", "--out", str(tmp_path / "runs" / name),
                            *args)  # fmt: skip
        assert done.returncode == 0, done.stderr
    reported = testtime_cli("report", str(tmp_path / "runs"), "--out", str(tmp_path / "report"))
    assert reported.returncode == 0, reported.stderr
    baselines = reported.stdout.count("] at k=")
    assert baselines >= 2 and reported.stdout.count("run − it") >= 2, reported.stdout


def test_an_unfinished_run_in_a_folder_is_listed_as_unfinished_not_a_refusal(
    testtime_cli: Cli, folder: Path, tmp_path: Path
) -> None:
    import shutil

    mixed = tmp_path / "mixed"
    shutil.copytree(folder, mixed)
    killed = mixed / "grid" / "killed"  # a batch run killed before its summary
    shutil.copytree(folder / "grid" / "one", killed)
    (killed / "summary.json").unlink()
    served = mixed / "grid" / "served"  # a served run killed under load
    shutil.copytree(folder / "grid" / "one", served)
    (served / "summary.json").unlink()
    manifest = json.loads((served / "config.json").read_text())
    (served / "config.json").write_text(json.dumps({**manifest, "kind": "served"}))

    reported = testtime_cli("report", str(mixed), "--out", str(tmp_path / "report"), "--json")
    assert reported.returncode == 0, reported.stderr
    report = json.loads(reported.stdout)
    assert [Path(row["run"]).name for row in report["runs"]] == ["maj", "one"]
    hints = {Path(u["run"]).name: u["continue_with"] for u in report["unfinished"]}
    assert hints == {
        "killed": f"testtime run --resume {killed}",
        "served": f"testtime serve --out {served} --model fake:echo --method single",
    }
    printed = testtime_cli("report", str(mixed), "--out", str(tmp_path / "report"))
    assert "unfinished, not compared" in printed.stderr + printed.stdout

    rows = list(csv.DictReader(io.StringIO(testtime_cli("runs", str(mixed), "--csv").stdout)))
    finished = {r["run"]: r["finished"] for r in rows}
    assert finished == {"maj": "True", "one": "True", "killed": "False", "served": "False"}
    listed = testtime_cli("runs", str(mixed)).stdout
    assert "batch, unfinished" in listed and "served, unfinished" in listed
    alone = testtime_cli("report", str(killed))  # nothing finished to compare: the error says how to go on
    assert alone.returncode == 2 and f"testtime run --resume {killed}" in alone.stderr


def test_a_run_that_answered_nothing_is_still_listed(testtime_cli: Cli, tmp_path: Path) -> None:
    """A run stopped before its first answer (a dead upstream) once vanished from `testtime runs`."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    out = str(tmp_path / "runs" / "dead")
    stopped = testtime_cli("run", "--bench", "arith", "--limit", "2", "--model", "openai:mock", "--api-base",
                           f"http://127.0.0.1:{closed}/v1", "--out", out, "--quiet")  # fmt: skip
    assert stopped.returncode == 4, stopped.stderr
    listed = testtime_cli("runs", str(tmp_path / "runs"), env={"COLUMNS": "200"})
    assert listed.returncode == 0, listed.stderr
    [row] = [line for line in listed.stdout.splitlines() if "dead" in line]
    assert "majority" in row and " 0 " in row
