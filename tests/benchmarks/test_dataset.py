"""Any dataset as a benchmark, labels optional: files of every kind, column mappings, multiple choice and code,
every method on unlabelled problems, predictions graded after the fact, and bad input as one line each."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testtime.benchmarks import benchmark_for
from testtime.benchmarks.dataset import Dataset
from testtime.core.errors import UserError
from testtime.run.directory import RunDir

Cli = Callable[..., Any]
ROWS = [
    {"qid": "q1", "question": "What is 2 + 3?", "final_answer": "3"},  # fake:echo answers the last number: 3
    {"qid": "q2", "question": "What is 10 + 7?", "final_answer": "17"},  # ... 7: wrong
    {"qid": "q3", "question": "What is 4 + 4?", "final_answer": "4"},
]


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _unlabelled(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "final_answer"} for r in rows]


def _run(cli: Cli, bench: Path, out: Path, *args: str) -> Any:
    done = cli("run", "--bench", str(bench), "--model", "fake:", "--n", "4", "--out", str(out), "--quiet", *args)
    assert done.returncode == 0, done.stderr
    return done


def test_an_unlabelled_file_runs_and_says_accuracy_was_not_measured(testtime_cli: Cli, tmp_path: Path) -> None:
    data = _jsonl(tmp_path / "mine.jsonl", _unlabelled(ROWS))
    done = _run(testtime_cli, data, tmp_path / "run")
    assert "columns problem ← question, id ← qid; no answer column: unlabelled" in done.stderr  # the guess, shown
    assert "not measured: no labels" in done.stdout
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["accuracy"] is None and summary["pass@1"] is None and summary["maj@k"] is None
    assert (summary["labelled"], summary["unlabelled"]) == (0, 3)
    assert summary["label_free"]["answer_rate"] == 1.0 and summary["label_free"]["vote_share"]["mean"] == 1.0
    assert summary["prediction_status"] == {"unlabelled": 3}
    predictions = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    assert [p["id"] for p in predictions] == ["q1", "q2", "q3"]
    assert [p["prediction"] for p in predictions] == ["3", "7", "4"] and all(
        p["confidence"] == 1.0 for p in predictions
    )
    assert predictions[0]["method"] == "majority" and predictions[0]["samples"] == 4


def test_a_labelled_copy_grades_the_predictions_as_the_labelled_run_did(testtime_cli: Cli, tmp_path: Path) -> None:
    labelled = _jsonl(tmp_path / "labelled.jsonl", ROWS)
    unlabelled = _jsonl(tmp_path / "unlabelled.jsonl", _unlabelled(ROWS))
    _run(testtime_cli, labelled, tmp_path / "with")
    _run(testtime_cli, unlabelled, tmp_path / "without")
    with_labels = json.loads((tmp_path / "with" / "summary.json").read_text())
    graded = testtime_cli(
        "grade", "--bench", str(labelled), "--predictions", str(tmp_path / "without" / "predictions.jsonl"), "--json"
    )
    assert graded.returncode == 0, graded.stderr
    report = json.loads(graded.stdout)
    assert report["accuracy"] == with_labels["accuracy"]["mean"] == pytest.approx(2 / 3)
    assert [p["correct"] for p in report["per_problem"]] == [True, False, True]


def test_a_csv_with_other_names_mapped_by_options(testtime_cli: Cli, tmp_path: Path) -> None:
    data = tmp_path / "exam.csv"
    data.write_text('Key,Prompt Text,Gold\nx,"What is 1 + 8, then?",8\ny,What is 5 + 5?,\n')
    done = _run(
        testtime_cli, data, tmp_path / "run",
        "--bench-opt", "problem=Prompt Text", "--bench-opt", "answer=Gold", "--bench-opt", "id=Key",
    )  # fmt: skip
    assert "problem ← Prompt Text, answer ← Gold, id ← Key" in done.stderr and "1 of 2 problems labelled" in done.stderr
    summary = RunDir(tmp_path / "run").read_summary()
    assert summary is not None and (summary.labelled, summary.unlabelled) == (1, 1)
    assert summary.accuracy is not None and summary.accuracy.mean == 1.0  # x: the echo's 8 is right
    manifest = RunDir(tmp_path / "run").read_manifest()
    assert manifest.benchmark["columns"] == {"problem": "Prompt Text", "answer": "Gold", "id": "Key"}
    assert manifest.run.bench == str(data.resolve()) and len(manifest.benchmark["sha256"]) == 64


def test_parquet_and_json_read_like_jsonl(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist(ROWS), tmp_path / "rows.parquet")
    (tmp_path / "rows.json").write_text(json.dumps({"data": ROWS}))
    loaded = [benchmark_for(str(tmp_path / name)).load() for name in ("rows.parquet", "rows.json")]
    for problems, references in loaded:
        assert [p.id for p in problems] == ["q1", "q2", "q3"] and references["q2"].answer == "17"


def test_every_method_runs_on_unlabelled_problems(testtime_cli: Cli, tmp_path: Path) -> None:
    data = _jsonl(tmp_path / "mine.jsonl", _unlabelled(ROWS)[:2])
    for method, extra in (("single", []), ("trt", ["-T", "1", "-K", "2"]), ("rsa", ["--method-opt", "population=2",
                          "--method-opt", "aggregate=2", "--method-opt", "steps=2"])):  # fmt: skip
        out = tmp_path / method
        done = testtime_cli("run", "--method", method, "--bench", str(data), "--model", "fake:", "--out", str(out),
                            "--quiet", *extra)  # fmt: skip
        assert done.returncode == 0, (method, done.stderr)
        summary = RunDir(out).read_summary()
        assert summary is not None and summary.accuracy is None and summary.unlabelled == 2, method
        predictions = RunDir(out).read_predictions()
        assert [p.prediction for p in predictions] == ["3", "7"], method
        if method == "single":
            assert all(p.confidence is None for p in predictions)  # one sample: no evidence, not certainty
        if method == "trt":
            assert summary.label_free is not None and summary.label_free.support is not None
            assert all(p.round == 1 for p in predictions)


def test_multiple_choice_letters_indexes_and_texts(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "question": "Pick red.", "choices": ["blue", "red", "green"], "answer": "B"},
        {"id": "b", "question": "Pick two.", "choices": ["one", "two"], "answer": 1},  # a 0-based index
        {"id": "c", "question": "Pick six.", "choices": ["five", "six"], "answer": "six"},  # the option's text
        {"id": "d", "question": "Pick any.", "choices": ["x", "y"]},  # unlabelled
    ]
    bench = benchmark_for(str(_jsonl(tmp_path / "mc.jsonl", rows)))
    problems, references = bench.load()
    assert bench.domain == "choice" and [references[p].answer for p in "abc"] == ["B", "B", "B"]
    assert not references["d"].labelled
    prompt = bench.prompt(problems[0])[-1].content
    assert "A) blue\nB) red\nC) green" in prompt and "letter" in prompt
    assert (
        bench.grade("so \\boxed{(B)}", references["a"]).correct
        and not bench.grade("\\boxed{A}", references["a"]).correct
    )


def test_gpqa_style_columns_are_shuffled_and_the_letter_follows_the_right_option(tmp_path: Path) -> None:
    rows = [
        {"Question": f"q{i}", "Correct Answer": f"right{i}", "Wrong 1": "w1", "Wrong 2": "w2", "Wrong 3": "w3"}
        for i in range(12)
    ]
    data = _jsonl(tmp_path / "gpqa.jsonl", rows)
    options = {"choices": "Correct Answer,Wrong 1,Wrong 2,Wrong 3", "answer": "Correct Answer"}
    bench = Dataset(source=str(data), shuffle_choices="true", **options)
    problems, references = bench.load()
    letters = []
    for problem in problems:
        letter = references[problem.id].answer
        assert problem.metadata["choices"]["ABCD".index(letter)].startswith("right")
        letters.append(letter)
    assert len(set(letters)) > 1  # shuffled: the right option is not always first
    again, _ = Dataset(source=str(data), shuffle_choices="true", **options).load()
    assert [p.metadata for p in again] == [p.metadata for p in problems]  # seeded by id: the same every time


def test_hmmt_february_2025_loads_from_a_data_folder(tmp_path: Path) -> None:
    rows = [{"id": f"hmmt-{i}", "problem": f"Problem {i}", "answer": "\\frac{1}{2}"} for i in range(3)]
    _jsonl(tmp_path / "hmmt-feb25.jsonl", rows)
    bench = benchmark_for("hmmt-feb25", tmp_path)
    problems, references = bench.load()
    assert len(problems) == 3 and bench.grade("\\boxed{0.5}", references["hmmt-0"]).correct
    assert bench.describe()["hub_id"] == "MathArena/hmmt_feb_2025"


def test_a_template_and_a_system_prompt_shape_the_prompt(tmp_path: Path) -> None:
    template = tmp_path / "prompt.txt"
    template.write_text("Solve carefully:\n{problem}\nBox it.")
    bench = Dataset(source=str(_jsonl(tmp_path / "m.jsonl", ROWS)), template=str(template), system="Be brief.")
    problems, _ = bench.load()
    messages = bench.prompt(problems[0])
    assert [m.role for m in messages] == ["system", "user"] and messages[0].content == "Be brief."
    assert messages[1].content == "Solve carefully:\nWhat is 2 + 3?\nBox it."
    assert bench.describe()["template_text"] == template.read_text()
    template.write_text("no placeholder")
    with pytest.raises(UserError, match="must contain \\{problem\\}"):
        Dataset(source=str(tmp_path / "m.jsonl"), template=str(template))


def test_code_rows_grade_on_their_hidden_tests_and_are_unlabelled_without(tmp_path: Path, open_sandbox_or_skip) -> None:  # type: ignore[no-untyped-def]
    public = json.dumps([{"input": "2\n", "output": "4\n", "testtype": "stdin"}])
    private = json.dumps([{"input": "5\n", "output": "10\n", "testtype": "stdin"}])
    rows = [
        {"id": "p", "question": "Print twice n.", "public_tests": public, "private_tests": private},
        {"id": "u", "question": "Print twice n.", "public_tests": public},
    ]
    bench = benchmark_for(str(_jsonl(tmp_path / "code.jsonl", rows)))
    bench.sandbox = open_sandbox_or_skip
    problems, references = bench.load()
    assert bench.domain == "code" and problems[0].public_tests and references["p"].labelled
    assert not references["u"].labelled  # public tests alone are part of the problem, not a label
    right = "```python\nprint(2 * int(input()))\n```"
    wrong = "```python\nprint(4)\n```"  # passes the public example only
    assert bench.grade(right, references["p"]).correct and not bench.grade(wrong, references["p"]).correct
    bench.sandbox = None  # the fixture owns it


@pytest.mark.parametrize(
    ("name", "content", "options", "message"),
    [
        ("empty.jsonl", "", {}, "holds no rows"),
        ("empty.csv", "question,answer\n", {}, "holds no rows"),
        ("dup.jsonl", '{"id": 1, "problem": "a"}\n{"id": "1", "problem": "b"}\n', {}, "dup.jsonl:2: duplicate id '1'"),
        ("byte.jsonl", b'{"problem": "caf\xe9"}\n', {}, "byte.jsonl:1: not valid UTF-8 (byte 0xe9 at column 17)"),
        ("map.jsonl", '{"problem": "a"}\n', {"answer": "gold"}, "no column 'gold' (answer); its columns: problem"),
        ("none.jsonl", '{"text2": "a"}\n', {}, "no problem column (looked for problem, question"),
        ("bad.parquet", "not parquet at all", {}, "cannot read"),
        ("list.jsonl", '{"problem": "a", "answer": [1, 2]}\n', {}, "answer (answer) must be one value"),
        ("nan.json", '[{"problem": "a", "answer": Infinity}]', {}, "answer (answer) is inf"),
        ("idlist.jsonl", '{"id": [1], "problem": "a"}\n', {}, "the id (id) must be a non-empty string or integer"),
        ("obj.jsonl", '{"problem": {"text": "a"}}\n', {}, "the problem (problem) must be non-empty text"),
        ("deep.json", "[" * 100_000 + "]" * 100_000, {}, "nested too deeply"),
        ("wide.csv", "problem,answer\na,1,extra\n", {}, "more cells than the header has columns"),
        ("kind.txt", "problem\n", {}, "or a data file (.jsonl, .ndjson, .json, .csv, .parquet)"),
        ("mc.jsonl", '{"problem": "a", "choices": ["x", "y"], "answer": "z"}\n', {}, "neither a letter"),
        ("digits.jsonl", '{"id": ' + "7" * 5000 + ', "problem": "a"}\n', {}, "digits.jsonl:1: a number too long"),
        ("lone.jsonl", '{"problem": "a \\ud800"}\n', {}, "lone.jsonl:1: holds an unpaired surrogate escape"),
        ("lone.json", '[{"problem": "a \\udfff b"}]', {}, "lone.json: holds an unpaired surrogate escape"),
        ("multi.json", '[{"problem": "a"},\n{"problem": }]', {}, "multi.json:2: not valid JSON"),
    ],
)
def test_bad_input_is_one_line(
    tmp_path: Path, name: str, content: str | bytes, options: dict[str, str], message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(UserError, match=message.replace("(", "\\(").replace(")", "\\)").replace("[", "\\[")):
        benchmark_for(str(path), options=options).load()


@pytest.mark.parametrize("name", ["bom.csv", "bom.jsonl", "bom.json"])
def test_a_byte_order_mark_is_dropped_for_every_kind_of_file(tmp_path: Path, name: str) -> None:
    """Excel writes one; read as text it used to rename a CSV's first column to "\\ufeffid" (its ids then
    guessed from row numbers, silently), while a .jsonl with one was refused."""
    rows = [{"id": "q7", "problem": "What is 2?", "answer": "2"}]
    text = {
        ".csv": "id,problem,answer\nq7,What is 2?,2\n",
        ".jsonl": json.dumps(rows[0]) + "\n",
        ".json": json.dumps(rows),
    }[Path(name).suffix]
    path = tmp_path / name
    path.write_bytes("\ufeff".encode() + text.encode())
    problems, _ = benchmark_for(str(path)).load()
    assert [p.id for p in problems] == ["q7"]


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_limit_reads_only_the_rows_it_keeps_and_hashes_the_whole_file(tmp_path: Path, suffix: str) -> None:
    """`--limit 3` on a file of a million rows read every row first (53 s, 2.5 GB; perf/data_limit.py): rows
    past the limit are never read now, so a broken row after them does not matter."""
    import hashlib

    good = [{"id": f"q{i}", "problem": f"What is {i}?", "answer": str(i)} for i in range(4)]
    if suffix == ".jsonl":
        text = "".join(json.dumps(r) + "\n" for r in good) + "{broken\n"
    else:
        text = "id,problem,answer\n" + "".join(f"{r['id']},{r['problem']},{r['answer']}\n" for r in good) + 'x,"\n'
    path = tmp_path / f"rows{suffix}"
    path.write_bytes(text.encode() + b"\xff\n")
    limited = benchmark_for(str(path), limit=3)
    problems, _ = limited.load()
    assert [p.id for p in problems] == ["q0", "q1", "q2"]
    assert limited.describe()["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert limited.describe()["rows"] is None  # not counted: reading stopped at the limit
    with pytest.raises(UserError):
        benchmark_for(str(path)).load()


def test_a_huge_csv_field_is_read_whole(tmp_path: Path) -> None:
    statement = "What is 1 + 1? " + "x" * 300_000  # over the csv module's default field limit of 128 KiB
    path = tmp_path / "big.csv"
    path.write_text(f'problem,answer\n"{statement}",2\n')
    problems, _ = benchmark_for(str(path)).load()
    assert problems[0].statement == statement


def test_the_cli_says_a_bad_file_in_one_line_and_writes_nothing(testtime_cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "dup.jsonl"
    path.write_text('{"id": "a", "problem": "x"}\n{"id": "a", "problem": "y"}\n')
    done = testtime_cli("run", "--bench", str(path), "--model", "fake:", "--out", str(tmp_path / "run"))
    assert done.returncode == 2 and "duplicate id 'a'" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "run").exists()
    unknown = testtime_cli("run", "--bench", "nosuchbench", "--model", "fake:", "--out", str(tmp_path / "r2"))
    assert (
        unknown.returncode == 2 and "unknown benchmark 'nosuchbench'" in unknown.stderr and ".parquet" in unknown.stderr
    )


def test_a_resume_refuses_a_data_file_that_changed(testtime_cli: Cli, tmp_path: Path) -> None:
    data = _jsonl(tmp_path / "mine.jsonl", ROWS)
    _run(testtime_cli, data, tmp_path / "run")
    _jsonl(data, [*ROWS, {"qid": "q4", "question": "What is 1 + 1?"}])
    done = testtime_cli("run", "--resume", str(tmp_path / "run"), "--quiet")
    assert done.returncode == 2 and "changed since this run started" in done.stderr


def test_a_hub_dataset_is_read_with_its_split_and_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hub path through `datasets` (offline here: its loader is replaced by one that records the call)."""
    datasets = pytest.importorskip("datasets")
    asked = []

    def load_dataset(name: str, config: str | None, split: str) -> list[dict[str, Any]]:
        asked.append((name, config, split))
        return [{"problem_idx": 7, "problem": "What is 6 + 1?", "answer": "7"}]

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    bench = benchmark_for("hf:org/comp", options={"split": "train", "config": "main"})
    problems, references = bench.load()
    assert asked == [("org/comp", "main", "train")] and bench.name == "comp"
    assert problems[0].id == "7" and references["7"].answer == "7"  # problem_idx guessed as the id

    def offline(*_: Any, **__: Any) -> None:
        raise ConnectionError("no network")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    monkeypatch.setattr(datasets, "get_dataset_split_names", offline)
    with pytest.raises(UserError, match=r"cannot load hub dataset org/comp .* ConnectionError: no network"):
        benchmark_for("hf:org/comp")


@pytest.mark.parametrize(
    ("bench", "hub_id", "answer", "graded"),
    [
        ("aime26", "MathArena/aime_2026", 42, "\\boxed{042}"),
        ("hmmt-feb26", "MathArena/hmmt_feb_2026", "\\frac{1}{2}", "\\boxed{0.5}"),
    ],
)
def test_the_2026_sets_load_from_their_hub_datasets_only_split(
    monkeypatch: pytest.MonkeyPatch, bench: str, hub_id: str, answer: object, graded: str
) -> None:
    """MathArena's 2026 sets as the hub serves them (offline here: `datasets` replaced): one split, `train`;
    `problem_idx` the id, AIME's answer an integer."""
    datasets = pytest.importorskip("datasets")
    monkeypatch.delenv("TESTTIME_DATA_DIR", raising=False)
    asked = []

    def load_dataset(name: str, config: str | None, split: str) -> list[dict[str, Any]]:
        asked.append((name, config, split))
        return [{"problem_idx": i, "problem": f"Problem {i}", "answer": answer} for i in (1, 2)]

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    problems, references = benchmark_for(bench).load()
    assert asked == [(hub_id, None, "train")]
    assert [p.id for p in problems] == ["1", "2"] and benchmark_for(bench).grade(graded, references["1"]).correct


@pytest.mark.parametrize("bench", ["aime26", "hmmt-feb26"])
def test_the_2026_sets_load_from_a_data_folder(tmp_path: Path, bench: str) -> None:
    _jsonl(tmp_path / f"{bench}.jsonl", [{"id": "p1", "problem": "What is 1+1?", "answer": "2"}])
    problems, references = benchmark_for(bench, tmp_path).load()
    assert [p.id for p in problems] == ["p1"] and references["p1"].answer == "2"


def test_a_hub_dataset_without_a_named_split_uses_its_only_one(monkeypatch: pytest.MonkeyPatch) -> None:
    datasets = pytest.importorskip("datasets")
    splits = {"org/one": ["train"], "org/many": ["train", "validation", "test"]}
    asked = []
    monkeypatch.setattr(datasets, "get_dataset_split_names", lambda name, config: splits[name])
    monkeypatch.setattr(datasets, "load_dataset", lambda name, config, split: asked.append(split) or [
        {"id": "a", "problem": "What is 1+1?", "answer": "2"}])  # fmt: skip
    bench = benchmark_for("hf:org/one")
    assert asked == ["train"] and bench.describe()["split"] == "train"
    with pytest.raises(UserError, match=r"org/many has splits train, validation, test: name one with --bench-opt"):
        benchmark_for("hf:org/many")


def test_an_offline_built_in_set_names_the_data_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    datasets = pytest.importorskip("datasets")

    def offline(*_: Any, **__: Any) -> None:
        raise ConnectionError("no network")

    monkeypatch.delenv("TESTTIME_DATA_DIR", raising=False)
    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(UserError, match=r"no network; offline\? give --data-dir .* holding aime24.jsonl"):
        benchmark_for("aime24")


def test_a_template_is_text_its_other_braces_kept(tmp_path: Path) -> None:
    """`\\boxed{}` in a template (the no-answer warning's own advice) once raised str.format's IndexError; a
    statement that itself holds "{choices}" is not filled twice; any other brace stays as written."""
    template = tmp_path / "prompt.txt"
    template.write_text('Put the final answer in \\boxed{}. JSON is fine too: {"a": 1}.\n{problem}')
    rows = [{"id": "q1", "problem": "What is {choices} + 1 when {choices} is 2?", "answer": "3"}]
    bench = Dataset(source=str(_jsonl(tmp_path / "m.jsonl", rows)), template=str(template))
    [problem], _ = bench.load()
    [message] = bench.prompt(problem)
    assert message.content == (
        'Put the final answer in \\boxed{}. JSON is fine too: {"a": 1}.\nWhat is {choices} + 1 when {choices} is 2?'
    )
