"""Math benchmark loaders against the development data, malformed input, arith, and grading."""

from __future__ import annotations

from pathlib import Path

import pytest

from testtime.benchmarks import BENCHMARKS, load_benchmarks
from testtime.core.answers import answer_key
from testtime.core.errors import UserError
from testtime.core.records import Reference

load_benchmarks()


@pytest.mark.parametrize(("name", "size"), [("aime24", 30), ("aime25", 30), ("amc23", 40), ("math500", 500)])
def test_loads_every_problem_with_a_reference(shared_data: Path, name: str, size: int) -> None:
    problems, references = BENCHMARKS.create(name, data_dir=shared_data).load()
    assert len(problems) == len(references) == size
    assert len({p.id for p in problems}) == size
    assert all(p.domain == "math" and p.statement for p in problems)
    assert all(references[p.id].answer for p in problems)


@pytest.mark.parametrize("name", ["aime24", "aime25"])
def test_aime_answers_are_integers_in_range(shared_data: Path, name: str) -> None:
    _, references = BENCHMARKS.create(name, data_dir=shared_data).load()
    assert all(0 <= int(answer_key(r.answer or "")) <= 999 for r in references.values())


def test_every_gold_answer_grades_itself_correct(shared_data: Path) -> None:
    for name in ("aime24", "amc23", "math500"):
        benchmark = BENCHMARKS.create(name, data_dir=shared_data)
        _, references = benchmark.load()
        wrong = [r.problem_id for r in references.values() if not benchmark.grade(r.answer, r).correct]
        assert wrong == [], f"{name}: gold answers that do not grade as correct: {wrong[:5]}"


def test_malformed_row_is_reported_with_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "aime24.jsonl").write_text('{"id": "a", "problem": "p", "answer": "1"}\n{"id": "b", "problem": \n')
    with pytest.raises(UserError, match=r"aime24.jsonl:2: not valid JSON"):
        BENCHMARKS.create("aime24", data_dir=tmp_path).load()


def test_missing_field_is_reported(tmp_path: Path) -> None:
    (tmp_path / "amc23.jsonl").write_text('{"id": "a", "problem": "p"}\n')
    with pytest.raises(UserError, match=r"amc23.jsonl:1: missing field\(s\) answer"):
        BENCHMARKS.create("amc23", data_dir=tmp_path).load()


def test_unreadable_data_dir_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a readable folder"):
        BENCHMARKS.create("aime24", data_dir=tmp_path / "nope").load()


def test_missing_bench_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"math500\.jsonl does not exist: .* `id`, `problem` and `answer`"):
        BENCHMARKS.create("math500", data_dir=tmp_path).load()


def test_arith_is_seeded_and_its_answers_are_right() -> None:
    first = BENCHMARKS.create("arith", digits=3, ops="+-*", size=50, seed=4).load()
    again = BENCHMARKS.create("arith", digits=3, ops="+-*", size=50, seed=4).load()
    other = BENCHMARKS.create("arith", digits=3, ops="+-*", size=50, seed=5).load()
    assert [p.statement for p in first[0]] == [p.statement for p in again[0]]
    assert [p.statement for p in first[0]] != [p.statement for p in other[0]]
    for problem in first[0]:
        a, op, b = problem.statement.removeprefix("What is ").removesuffix("?").split()
        assert int(first[1][problem.id].answer or "") == eval(f"{int(a)} {op} {int(b)}")
        assert 100 <= int(a) <= 999


def test_arith_prompt_shows_the_boxed_format() -> None:
    benchmark = BENCHMARKS.create("arith")
    problems, _ = benchmark.load()
    messages = benchmark.prompt(problems[0])
    assert "\\boxed{" in messages[1].content and messages[-1].content == problems[0].statement


@pytest.mark.parametrize(
    ("prediction", "correct", "status"),
    [
        ("\\boxed{016}", True, "correct"),
        ("16", True, "correct"),
        ("I think 16 but \\boxed{17}", False, "wrong"),
        ("no idea", False, "wrong"),
        ("\\boxed{16", False, "no_answer"),
        (None, False, "no_answer"),
    ],
)
def test_grading_a_prediction(prediction: str | None, correct: bool, status: str) -> None:
    grade = BENCHMARKS.create("arith").grade(prediction, Reference(problem_id="p", answer="16"))
    assert (grade.correct, grade.status) == (correct, status)


def test_a_missing_offline_file_says_its_name_fields_and_how_to_make_it(tmp_path: Path) -> None:
    from testtime.benchmarks import BENCHMARKS
    from testtime.core.errors import UserError

    with pytest.raises(UserError) as said:
        BENCHMARKS.create("aime26", data_dir=str(tmp_path))
    text = str(said.value)
    assert f"{tmp_path / 'aime26.jsonl'} does not exist" in text and "`id`, `problem` and `answer`" in text
    assert "MathArena/aime_2026" in text and "--bench-opt id=problem_idx" in text and "\n" not in text
