"""LiveCodeBench: both test encodings, filters, errata, the prompt, program extraction and sandbox grading."""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from pathlib import Path

import pytest

from testtime.benchmarks import BENCHMARKS, Benchmark, load_benchmarks
from testtime.benchmarks.lcb_data import decode_tests, encode_private_tests, release_shards
from testtime.core.errors import UserError
from testtime.core.programs import extract_program
from testtime.core.records import Reference, TestCase
from testtime.sandbox import Sandbox

load_benchmarks()
PRIVATE = [TestCase(input="5 6\n", output="121\n"), TestCase(input="1 1\n", output="4\n")]


def hub_row(question_id: str = "abc999_a", **overrides: object) -> dict[str, object]:
    """A row encoded the way the hub dataset encodes it: JSON strings, private tests compressed."""
    row = {
        "question_id": question_id,
        "question_title": "Square of sum",
        "question_content": "Print (A+B)^2.",
        "platform": "atcoder",
        "contest_id": "abc999",
        "contest_date": "2025-02-01T00:00:00",
        "difficulty": "easy",
        "starter_code": "",
        "metadata": "{}",
        "public_test_cases": json.dumps([{"input": "20 25\n", "output": "2025\n", "testtype": "stdin"}]),
        "private_test_cases": encode_private_tests(PRIVATE),
    }
    return {**row, **overrides}


def write_rows(folder: Path, rows: list[dict[str, object]]) -> Path:
    (folder / "lcb-v6.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_private_tests_decode_from_base64_zlib_pickle() -> None:
    assert decode_tests(encode_private_tests(PRIVATE)) == PRIVATE


def test_public_tests_decode_from_a_json_string_and_from_a_list() -> None:
    as_list = [{"input": "1", "output": "2", "testtype": "functional"}]
    assert (
        decode_tests(json.dumps(as_list))
        == decode_tests(as_list)
        == [TestCase(input="1", output="2", testtype="functional")]
    )


def test_a_pickle_that_names_a_class_is_refused() -> None:
    hostile = base64.b64encode(zlib.compress(pickle.dumps(Path("/etc/passwd")))).decode()
    with pytest.raises(ValueError, match="UnpicklingError"):  # refused: the class is never loaded
        decode_tests(hostile)


def test_hub_encoded_rows_load_with_hidden_tests(tmp_path: Path) -> None:
    benchmark = BENCHMARKS.create("lcb-v6", data_dir=write_rows(tmp_path, [hub_row()]))
    problems, references = benchmark.load()
    [problem] = problems
    assert problem.domain == "code" and len(problem.public_tests) == 1
    reference = references[problem.id]
    assert len(reference.hidden_tests) == 3 and reference.metadata["public_only"] is False
    # the method's view never holds the private tests
    assert "121" not in problem.model_dump_json()


def test_errata_problems_are_flagged(tmp_path: Path) -> None:
    problems, _ = BENCHMARKS.create("lcb-v6", data_dir=write_rows(tmp_path, [hub_row("abc343_a")])).load()
    assert problems[0].metadata["erratum"] == "multiple valid outputs, one accepted"


def test_development_copy_loads_with_filters(shared_data: Path) -> None:
    everything, references = BENCHMARKS.create("lcb-v6", data_dir=shared_data).load()
    assert len(everything) == 175
    assert sum(p.metadata["platform"] == "leetcode" for p in everything) == 63
    assert all(p.metadata["func_name"] for p in everything if p.metadata["platform"] == "leetcode")
    assert all(references[p.id].metadata["public_only"] for p in everything)
    easy, _ = BENCHMARKS.create("lcb-v6", data_dir=shared_data, difficulty="easy").load()
    assert len(easy) == 43
    window, _ = BENCHMARKS.create("lcb-v6", data_dir=shared_data, start_date="2025-03-01", end_date="2025-03-31").load()
    assert window and all("2025-03" in str(p.metadata["contest_date"]) for p in window)
    atcoder_hard, _ = BENCHMARKS.create("lcb-v6", data_dir=shared_data, platform="atcoder", difficulty="hard").load()
    assert all(p.metadata["platform"] == "atcoder" and p.metadata["difficulty"] == "hard" for p in atcoder_hard)


def test_an_empty_selection_is_a_clear_error(shared_data: Path) -> None:
    with pytest.raises(UserError, match="no problem matches"):
        BENCHMARKS.create("lcb-v6", data_dir=shared_data, start_date="2030-01-01").load()


@pytest.mark.parametrize(("release", "shards"), [("release_v6", 6), ("release_v2", 2), ("v6", 1), ("v5_v6", 2)])
def test_releases_map_to_hub_shards(release: str, shards: int) -> None:
    assert len(release_shards(release)) == shards


def test_unknown_release_is_a_clear_error() -> None:
    with pytest.raises(UserError, match="unknown LiveCodeBench release"):
        release_shards("release_v9")


def test_prompt_follows_livecodebench(shared_data: Path) -> None:
    benchmark = BENCHMARKS.create("lcb-v6", data_dir=shared_data)
    problems, _ = benchmark.load()
    leetcode = next(p for p in problems if p.starter_code)
    atcoder = next(p for p in problems if not p.starter_code)
    system, user = benchmark.prompt(leetcode)
    assert "expert Python programmer" in system.content and leetcode.starter_code in user.content
    assert "### Answer: (use the provided format with backticks)" in user.content
    assert "Read the inputs from stdin" in benchmark.prompt(atcoder)[1].content


@pytest.mark.parametrize(
    ("text", "program"),
    [
        ("Here:\n```python\nprint(1)\n```", "print(1)\n"),
        ("```python\nx = 1\n```\nthen\n```python\nprint(2)\n```", "print(2)\n"),  # the last block
        ("<think>```python\nwrong\n```</think>```python\nright()\n```", "right()\n"),
        ("print(1) with no fences", None),
        ("```python\n\n```", None),
        ("<think>```python\nx\n```", None),
    ],
)
def test_program_extraction(text: str, program: str | None) -> None:
    assert extract_program(text) == program


@pytest.fixture(scope="module")
def graded(open_sandbox_or_skip: Sandbox) -> Benchmark:
    benchmark = BENCHMARKS.create("lcb-v6")
    benchmark.sandbox = open_sandbox_or_skip
    return benchmark


REFERENCE = Reference(problem_id="p", hidden_tests=(TestCase(input="20 25\n", output="2025\n"), *PRIVATE))


@pytest.mark.parametrize(
    ("prediction", "status"),
    [
        ("a, b = map(int, input().split())\nprint((a + b) ** 2)", "correct"),
        ("```python\na, b = map(int, input().split())\nprint((a + b) ** 2)\n```", "correct"),
        ("a, b = map(int, input().split())\nprint(a * a + b * b)", "wrong_answer"),
        ("def f(:", "compile_error"),
        ("import sys\nsys.exit(3)", "wrong_answer"),  # officially any exit ends the program: nothing printed
        ("print(1 / 0)", "runtime_error"),
        ("while True: pass", "time_limit"),
        ("just words", "compile_error"),
        ("", "no_code"),
        ("no fences here ```", "no_code"),
    ],
)
def test_grading_in_the_sandbox(graded: object, prediction: str, status: str) -> None:
    graded.limits = graded.limits.model_copy(update={"timeout_s": 1.0})  # type: ignore[attr-defined]
    assert graded.grade(prediction, REFERENCE).status == status  # type: ignore[attr-defined]


def test_the_official_grader_is_an_option_recorded_in_the_summary(tmp_path: Path, testtime_cli) -> None:  # type: ignore[no-untyped-def]
    state = (
        "class Solution:\n    def __init__(self):\n        self.n = 0\n"
        "    def f(self, x):\n        self.n += 1\n        return self.n"
    )
    row = hub_row(
        "state-bug",
        platform="leetcode",
        metadata=json.dumps({"func_name": "f"}),
        public_test_cases=json.dumps([{"input": "1", "output": "1", "testtype": "functional"}]),
        private_test_cases=json.dumps([{"input": "2", "output": "1", "testtype": "functional"}]),
    )
    data = write_rows(tmp_path, [row])
    predictions = tmp_path / "p.jsonl"
    predictions.write_text(json.dumps({"id": "state-bug", "prediction": state}) + "\n")
    verdicts = {}
    for grader in ("lenient", "official", None):
        chosen = ["--bench-opt", f"grader={grader}"] if grader else []
        done = testtime_cli("grade", "--bench", "lcb-v6", "--data-dir", str(data), "--predictions", str(predictions),
                            *chosen, "--json", timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["summary"]["grader"] == (grader or "official")  # official unless asked otherwise
        verdicts[grader] = report["per_problem"][0]["status"]
    assert verdicts == {"lenient": "correct", "official": "wrong_answer", None: "wrong_answer"}


def test_an_unknown_grader_is_a_clear_error() -> None:
    with pytest.raises(UserError, match="lcb-v6 option grader: Input should be 'official' or 'lenient'"):
        BENCHMARKS.create("lcb-v6", grader="strict")
