"""Every input is checked at the edge, in one line: non-finite numbers (which would go upstream as invalid JSON),
ports past 65535, a CSV whose quote never closes (which swallowed every row after it), a served run given to
`run --resume`; and a run its budget stopped exits with its own status, so a script cannot take it for done."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from testtime.models.mock_server import MockChatServer

Cli = Callable[..., CompletedProcess[str]]
FIXTURES = Path(__file__).parent.parent / "fixtures" / "runs"


def one_line_refusal(done: CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--temperature", "inf"), ("--temperature", "nan"), ("--top-p", "nan"), ("--max-cost", "inf"),
     ("--request-timeout", "inf"), ("--method-opt", "tie_policy=earliest --seed 0 --max-tokens 8 --temperature -inf")],
)  # fmt: skip
def test_a_non_finite_number_never_goes_upstream(testtime_cli: Cli, tmp_path: Path, flag: str, value: str) -> None:
    with MockChatServer() as upstream:
        args = ["--bench", "arith", "--limit", "2", "--model", "openai:m", "--api-base", upstream.url]
        done = testtime_cli("run", *args, flag, *value.split(), "--out", str(tmp_path / "run"))
        assert upstream.requests == 0
    one_line_refusal(done, "finite")


def test_a_method_option_cannot_be_infinite(testtime_cli: Cli, tmp_path: Path) -> None:
    done = testtime_cli("run", "--method", "ttrl", "--method-opt", "lr=inf", "--out", str(tmp_path / "run"))
    one_line_refusal(done, "lr", "finite")


@pytest.mark.parametrize(
    ("flag", "value", "words"),
    [("--port", "70000", ("--port", "0-65535")), ("--port", "-1", ("--port",)),
     ("--drain-timeout", "nan", ("--drain-timeout", "finite")), ("--drain-timeout", "-1", ("--drain-timeout",)),
     ("--header-timeout", "inf", ("--header-timeout",)), ("--keepalive", "inf", ("--keepalive",))],
)  # fmt: skip
def test_serve_refuses_bad_bounds_before_it_listens(
    testtime_cli: Cli, tmp_path: Path, flag: str, value: str, words: tuple[str, ...]
) -> None:
    done = testtime_cli("serve", "--model", "fake:echo", flag, value, "--out", str(tmp_path / "served"))
    one_line_refusal(done, *words)
    assert not (tmp_path / "served").exists()


def test_sandbox_exec_refuses_an_infinite_timeout(testtime_cli: Cli, tmp_path: Path) -> None:
    program, tests = tmp_path / "p.py", tmp_path / "t.json"
    program.write_text("print(1)\n")
    tests.write_text(json.dumps([{"input": "", "output": "1\n"}]))
    one_line_refusal(
        testtime_cli("sandbox", "exec", str(program), "--tests", str(tests), "--timeout", "inf"), "--timeout"
    )


def test_a_csv_quote_never_closed_is_refused_with_its_line(testtime_cli: Cli, tmp_path: Path) -> None:
    data = tmp_path / "mine.csv"
    data.write_text('id,problem,answer\nq1,What is 1+1?,2\nq2,"What is 2+2?,4\nq3,What is 3+3?,6\n')
    done = testtime_cli("run", "--bench", str(data), "--model", "fake:echo", "--out", str(tmp_path / "run"))
    one_line_refusal(done, f"{data}:3", "never closed")


def test_quoted_cells_that_close_still_read(testtime_cli: Cli, tmp_path: Path) -> None:
    data = tmp_path / "mine.csv"
    data.write_text('id,problem,answer\nq1,He said "hi" then 1+1?,2\nq2,"What is\n2+2?",4\n')
    done = testtime_cli("run", "--bench", str(data), "--model", "fake:echo", "--quiet", "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["problems"] == 2


def test_a_run_stopped_by_its_budget_exits_4_and_its_resume_0(testtime_cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ("--bench", "arith", "--limit", "6", "--n", "2", "--concurrency", "1", "--model", "fake:echo", "--quiet")
    stopped = testtime_cli("run", *args, "--max-tokens-total", "40", "--out", str(out))
    assert stopped.returncode == 4 and "stopped: token budget reached" in stopped.stderr
    assert not json.loads((out / "summary.json").read_text())["complete"]
    finished = testtime_cli("run", "--resume", str(out), "--max-tokens-total", "100000", "--quiet")
    assert finished.returncode == 0, finished.stderr


def test_resuming_a_served_run_names_serve(testtime_cli: Cli, tmp_path: Path) -> None:
    served = tmp_path / "served"
    shutil.copytree(FIXTURES / "served-majority-v2", served)
    before = {p.name: p.read_bytes() for p in served.iterdir() if p.is_file()}
    done = testtime_cli("run", "--resume", str(served))
    one_line_refusal(done, "served run", f"testtime serve --out {served}")
    assert {p.name: p.read_bytes() for p in served.iterdir() if p.is_file() and p.name in before} == before
