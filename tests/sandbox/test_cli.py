"""`testtime sandbox exec` as a user or a script runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from testtime.sandbox import Sandbox


@pytest.fixture(scope="module")
def any_sandbox(open_sandbox_or_skip: Sandbox) -> str:
    return open_sandbox_or_skip.name


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "testtime.cli", "sandbox", *args], capture_output=True, text=True, timeout=120
    )


def test_exec_json_reports_each_verdict(tmp_path: Path, any_sandbox: str) -> None:
    program = tmp_path / "p.py"
    program.write_text("n = int(input())\nif n == 3:\n    while True: pass\nprint(n * 2)")
    tests = tmp_path / "t.json"
    tests.write_text(
        json.dumps(
            [
                {"input": "1", "output": "2", "testtype": "stdin"},
                {"input": "2", "output": "5", "testtype": "stdin"},
                {"input": "3", "output": "6", "testtype": "stdin"},
            ]
        )
    )
    result = cli("exec", str(program), "--tests", str(tests), "--json", "--timeout", "1")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["backend"] == any_sandbox and report["passed"] is False
    assert [t["verdict"] for t in report["tests"]] == ["pass", "wrong_answer", "time_limit"]
    assert all(isinstance(t["seconds"], float) for t in report["tests"])


def test_exec_functional_with_func_name(tmp_path: Path, any_sandbox: str) -> None:
    program = tmp_path / "s.py"
    program.write_text("class Solution:\n    def add(self, a, b):\n        return a + b")
    tests = tmp_path / "t.json"
    tests.write_text(json.dumps([{"input": "1\n2", "output": "3", "testtype": "functional"}]))
    result = cli("exec", str(program), "--tests", str(tests), "--func-name", "add")
    assert result.returncode == 0 and "all passed" in result.stdout


@pytest.mark.parametrize(
    ("tests_text", "message"),
    [("not json", "expected a JSON list"), ("[]", "holds no tests"), ('[{"inp": 1}]', "expected a JSON list")],
)
def test_exec_bad_tests_file_is_one_clear_line(tmp_path: Path, tests_text: str, message: str) -> None:
    program = tmp_path / "p.py"
    program.write_text("print(1)")
    tests = tmp_path / "t.json"
    tests.write_text(tests_text)
    result = cli("exec", str(program), "--tests", str(tests))
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_exec_unknown_sandbox_is_a_clear_error(tmp_path: Path) -> None:
    result = cli("exec", str(tmp_path / "p.py"), "--tests", str(tmp_path / "t.json"), "--sandbox", "host")
    assert result.returncode == 2 and "--sandbox must be one of auto, docker, bwrap" in result.stderr
