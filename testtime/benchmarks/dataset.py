"""Any dataset as a benchmark: `--bench PATH` (`.jsonl`, `.json`, `.csv`, `.parquet`) or `--bench hf:ORG/NAME`.

Columns are mapped by benchmark options (`--bench-opt problem=question --bench-opt answer=final_answer
--bench-opt id=qid`), else guessed from common names; the mapping is printed and recorded in the manifest.
Labels are optional, per row: a row without an answer (math, multiple choice) or without hidden tests (code)
is unlabelled — every method runs on it and nothing is graded. Domains: `math` (a boxed answer, graded by the
one answer relation), `choice` (multiple choice: options listed with letters, a boxed letter, graded by the
same relation; `shuffle_choices` for GPQA-style files whose first option is always right), `code` (tests
in LiveCodeBench's format, graded in the sandbox) and `text` (free-form: the prompt is the problem as it is,
the whole final reply is the answer, chosen by a free-form selector and graded equal to the label after
SQuAD's normalisation; guessed when most labels are prose: words, no digits, no LaTeX). `template` (a file
with `{problem}` and, for choice, `{choices}`) and `system` set the prompt. The built-in math benchmarks are
this loader with a preset mapping.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import random
import re
import string
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from testtime.benchmarks.base import Benchmark, Grade, SealedReferences
from testtime.benchmarks.code_common import SYSTEM as CODE_SYSTEM
from testtime.benchmarks.code_common import code_prompt, grade_program
from testtime.benchmarks.lcb_data import decode_tests, metadata_of
from testtime.benchmarks.rows import Row, file_rows, hub_rows
from testtime.core.answers import equivalent, extract_answer
from testtime.core.answers.domain import auto_domain
from testtime.core.answers.freeform import final_reply, texts_match
from testtime.core.errors import UserError
from testtime.core.options import Options
from testtime.core.records import Message, Problem, Reference
from testtime.sandbox import Limits

INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
CHOICE_INSTRUCTION = (
    "Answer with the letter of the correct option. Please reason step by step, and put your final answer "
    "(the letter) within \\boxed{}."
)
GUESSES = {
    "problem": ("problem", "question", "prompt", "statement", "input", "query", "question_content", "text"),
    "answer": ("answer", "final_answer", "expected_answer", "gold", "label", "target", "ground_truth", "solution"),
    "id": ("id", "problem_id", "question_id", "qid", "uid", "unique_id", "idx", "problem_idx", "index"),
    "choices": ("choices", "options"),
    "public_tests": ("public_tests", "public_test_cases"),
    "private_tests": ("private_tests", "private_test_cases", "hidden_tests"),
    "starter_code": ("starter_code",),
    "func_name": ("func_name", "entry_point"),
}


class DatasetOptions(Options):
    """How a file's columns become problems (every field a `--bench-opt KEY=VALUE`)."""

    problem: str | None = Field(None, description="the column holding the problem (default: guessed)")
    answer: str | None = Field(None, description="the column holding the answer; rows without one are unlabelled")
    id: str | None = Field(None, description="the column holding a unique id (default: guessed, else the row number)")
    domain: Literal["auto", "math", "code", "choice", "text"] | None = Field(
        None,
        description="auto (the default) | math | code | choice | text. auto: choice with a choices column, code "
        "with test columns, text when most answers are prose or, with no answers, most problems ask for no math",
    )
    choices: str | None = Field(None, description="choice: a column holding a list, or columns A,B,C,... in order")
    shuffle_choices: bool = Field(False, description="choice: shuffle each row's options (seeded by its id)")
    public_tests: str | None = Field(None, description="code: public tests (LiveCodeBench's format), shown")
    private_tests: str | None = Field(None, description="code: hidden tests that grade; none: unlabelled")
    starter_code: str | None = Field(None, description="code: the column holding starter code")
    func_name: str | None = Field(None, description="code: the column naming the function to call")
    template: str | None = Field(None, description="a prompt file with {problem} (and {choices} for choice)")
    system: str | None = Field(None, description="a system prompt")
    split: str | None = Field(None, description="hub: the split (default: the dataset's only one)")
    config: str | None = Field(None, description="hub: the configuration")
    timeout: float = Field(6.0, gt=0, description="code: seconds per test")


class Dataset(Benchmark):
    """A benchmark read from a file or hub dataset with a column mapping."""

    Options = DatasetOptions
    require_labels = False  # the built-in benchmarks refuse a row without its answer
    kept_metadata: ClassVar[
        tuple[str, ...]
    ] = ()  # columns copied to the problem (never a user's: one may hold a label)

    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        source: str,
        preset: DatasetOptions | None = None,
        limit: int | None = None,
        **options: Any,
    ) -> None:
        """`limit`: read only the first rows of a file (a run's --limit), so `--limit 3` on a file of a million
        rows reads three; the data's sha256 is still of the whole file."""
        self.source = source
        self.limit = limit
        self.split: str | None = None  # a hub dataset's split, as read
        super().__init__(data_dir, **options)
        # a user's file: the options given; a built-in benchmark: its preset mapping (it takes no options)
        self.dataset = preset or self.options
        if not isinstance(self.dataset, DatasetOptions):
            raise TypeError("a dataset needs a DatasetOptions mapping")
        self.notes: list[str] = []
        self.rows = self._read()
        self.columns = list(dict.fromkeys(k for row in self.rows for k in row))
        self.mapping = self._map()
        self.chosen = self.dataset.domain in (None, "auto")  # the data decides, not the user
        self.domain = self.dataset.domain if not self.chosen else (
            "choice" if self.mapping.get("choices") else "code" if self._has_tests() else self._answer_kind()
        )  # fmt: skip
        self.needs_sandbox = self.domain == "code"
        self.limits = Limits(timeout_s=self.dataset.timeout, early_exit=True)
        self.template = self._template()
        shown = ", ".join(f"{role} ← {column}" for role, column in self.mapping.items() if column)
        labels = "" if self.mapping.get("answer") or self.domain == "code" else "; no answer column: unlabelled"
        kind = self.domain
        if self.domain == "text" and self.chosen:
            why = "prose answers, graded equal after normalisation" if self.mapping.get("answer") else (
                "the problems ask for no math: each reply as written, no answer format imposed"
            )  # fmt: skip
            kind = f"text (chosen from the data: {why}; else --bench-opt domain=math)"
        self.notes.append(f"{self.name}: {len(self.rows)} rows, {kind}; columns {shown}{labels}")

    @property
    def name(self) -> str:  # type: ignore[override]
        tail = self.source.removeprefix("hf:").rstrip("/").split("/")[-1]
        return Path(tail).stem if not self.source.startswith("hf:") else tail

    # -- reading ----------------------------------------------------------------------------------------

    def _read(self) -> list[Row]:
        if self.source.startswith("hf:"):
            rows, self.split = hub_rows(
                self.source.removeprefix("hf:"), self.dataset.split, self.dataset.config, self.source
            )
            return rows
        return file_rows(Path(self.source).expanduser(), self.limit)

    def _map(self) -> dict[str, str | None]:
        wanted = ["problem", "answer", "id", "choices", "public_tests", "private_tests", "starter_code", "func_name"]
        mapping: dict[str, str | None] = {}
        for role in wanted:
            asked = getattr(self.dataset, role)
            if asked is not None:
                for column in asked.split(",") if role == "choices" else [asked]:
                    if column.strip() not in self.columns and self.require_labels:
                        raise UserError(f"{self.rows[0].where}: missing field(s) {column.strip()}")
                    if column.strip() not in self.columns:
                        known = ", ".join(self.columns)
                        raise UserError(f"{self.source}: no column '{column.strip()}' ({role}); its columns: {known}")
                mapping[role] = asked
            else:
                lowered = {c.lower(): c for c in self.columns}
                mapping[role] = next((lowered[g] for g in GUESSES[role] if g in lowered), None)
        if mapping["problem"] is None:
            raise UserError(
                f"{self.source}: no problem column (looked for {', '.join(GUESSES['problem'])}); its columns: "
                f"{', '.join(self.columns)}; name it with --bench-opt problem=COLUMN"
            )
        return mapping

    def _answer_kind(self) -> Literal["math", "text"]:
        """`--domain auto` on a file of problems: by its labels, else by its problems (`auto_domain`)."""
        column, problem = self.mapping.get("answer"), self.mapping.get("problem")
        labels = [row.get(column) for row in self.rows] if column else []
        statements = [row.get(problem) for row in self.rows] if problem else []
        return auto_domain(
            [v for v in statements if isinstance(v, str)], [v for v in labels if isinstance(v, str)]
        )  # fmt: skip

    def _has_tests(self) -> bool:
        return bool(self.mapping.get("public_tests") or self.mapping.get("private_tests"))

    def _template(self) -> str | None:  # a user's prompt file: text with {problem} (and {choices}) in it
        if self.dataset.template is None:
            return None
        path = Path(self.dataset.template).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"template {path}: cannot read it ({exc})") from None
        needed = ["{problem}"] + (["{choices}"] if self.domain == "choice" else [])
        missing = [p for p in needed if p not in text]
        if missing:
            raise UserError(f"template {path}: it must contain {' and '.join(missing)}")
        return text

    def describe(self) -> dict[str, Any]:
        # `rows`: the file's rows; null when --limit stopped reading before its end (they were not counted)
        stopped_early = self.limit is not None and len(self.rows) >= self.limit
        rows = None if stopped_early else len(self.rows)
        described = {**super().describe(), "source": self.source, "domain": self.domain, "rows": rows}
        described["domain_from"] = "data" if self.chosen else "option"  # --domain auto chose it, or the user
        described["columns"] = {role: column for role, column in self.mapping.items() if column}
        if self.source.startswith("hf:"):
            described["split"] = self.split
        else:
            described["sha256"] = self._sha256()
        if self.template is not None:
            described["template_text"] = self.template
        return described

    @functools.cache  # noqa: B019 - one Dataset, one file: hashed once, a block at a time
    def _sha256(self) -> str:
        digest = hashlib.sha256()
        with Path(self.source).expanduser().open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()

    # -- problems ---------------------------------------------------------------------------------------

    def load(self) -> tuple[list[Problem], SealedReferences]:
        problems, references, seen = [], [], {}
        for number, row in enumerate(self.rows, 1):
            pid = self._id(row, number)
            if pid in seen:
                raise UserError(f"{row.where}: duplicate id '{pid}' (first on {seen[pid]})")
            seen[pid] = row.position
            problem, reference = self._problem(pid, row)
            problems.append(problem)
            references.append(reference)
        labelled = sum(r.labelled for r in references)
        if self.require_labels and labelled < len(references):
            missing = next(row.where for row, r in zip(self.rows, references, strict=True) if not r.labelled)
            raise UserError(f"{missing}: missing field(s) answer")
        if labelled < len(references):
            self.notes.append(f"{self.name}: {labelled} of {len(references)} problems labelled; the rest unlabelled")
        return problems, SealedReferences(references)

    def _id(self, row: Row, number: int) -> str:
        column = self.mapping["id"]
        if column is None:
            return f"{self.name}-{number}"
        value = row.get(column)
        if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value).strip() == "":
            raise UserError(f"{row.where}: the id ({column}) must be a non-empty string or integer, got {value!r:.60}")
        return str(value).strip()

    def _problem(self, pid: str, row: Row) -> tuple[Problem, Reference]:
        statement = row.get(self.mapping["problem"] or "")
        if not isinstance(statement, str) or not statement.strip():
            raise UserError(f"{row.where}: the problem ({self.mapping['problem']}) must be non-empty text")
        if self.domain == "code":
            return self._code(pid, row, statement)
        metadata: dict[str, Any] = {k: row[k] for k in self.kept_metadata if row.get(k) is not None}
        answer = _label(row, self.mapping["answer"])
        if self.domain == "choice":
            options = self._choices(row)
            if self.dataset.shuffle_choices:
                order = list(range(len(options)))
                random.Random(f"{self.name}-{pid}").shuffle(order)
                answer = _choice_letter(row, answer, options) if answer is not None else None
                position = {old: new for new, old in enumerate(order)}
                options = [options[i] for i in order]
                answer = None if answer is None else string.ascii_uppercase[position[_index(answer)]]
            else:
                answer = _choice_letter(row, answer, options) if answer is not None else None
            metadata["choices"] = options
        domain = "text" if self.domain == "text" else "math"  # multiple choice is a boxed answer, as math
        problem = Problem(id=pid, domain=domain, statement=statement, metadata=metadata)
        return problem, Reference(problem_id=pid, answer=answer)

    def _choices(self, row: Row) -> list[str]:
        column = self.mapping["choices"] or ""
        if "," in column:
            values = [row.get(c.strip()) for c in column.split(",")]
        else:
            values = row.get(column)
            if isinstance(values, str):
                try:
                    values = json.loads(values)
                except json.JSONDecodeError:
                    values = None
        if not isinstance(values, list) or not 2 <= len(values) <= 26 or any(v in (None, "") for v in values):
            raise UserError(f"{row.where}: choices ({column}) must be 2 to 26 non-empty options")
        return [str(v).strip() for v in values]

    def _code(self, pid: str, row: Row, statement: str) -> tuple[Problem, Reference]:
        try:
            public = decode_tests(row.get(self.mapping["public_tests"] or ""))
            private = decode_tests(row.get(self.mapping["private_tests"] or ""))
        except (ValueError, KeyError, TypeError) as exc:
            raise UserError(f"{row.where}: undecodable tests ({type(exc).__name__}: {exc})") from None
        column = self.mapping["func_name"]
        func_name = row.get(column) if column else metadata_of(row).get("func_name") if "metadata" in row else None
        starter = row.get(self.mapping["starter_code"] or "") or ""
        if public and public[0].testtype == "functional" and not func_name:
            raise UserError(f"{row.where}: functional tests need the function's name (--bench-opt func_name=COLUMN)")
        metadata = {"func_name": func_name} if func_name else {}
        problem = Problem(
            id=pid, domain="code", statement=statement, starter_code=str(starter), public_tests=tuple(public),
            metadata=metadata,
        )  # fmt: skip
        hidden = tuple(public + private) if private else ()  # no hidden tests: unlabelled
        return problem, Reference(problem_id=pid, hidden_tests=hidden, metadata=metadata)

    # -- prompting and grading --------------------------------------------------------------------------

    def prompt(self, problem: Problem) -> list[Message]:
        system = [Message(role="system", content=self.dataset.system)] if self.dataset.system else []
        if self.domain == "code" and self.template is None:
            return code_prompt(problem, self.dataset.system or CODE_SYSTEM)
        choices = problem.metadata.get("choices") or []
        listed = "\n".join(f"{string.ascii_uppercase[i]}) {text}" for i, text in enumerate(choices))
        if self.template is not None:
            asked = fill(self.template, problem=problem.statement, choices=listed)
            return [*system, Message(role="user", content=asked)]
        if self.domain == "choice":
            return [*system, Message(role="user", content=f"{problem.statement}\n\n{listed}\n\n{CHOICE_INSTRUCTION}")]
        if self.domain == "text":  # free-form: the request as it is, no answer format imposed
            return [*system, Message(role="user", content=problem.statement)]
        return [*system, Message(role="user", content=f"{problem.statement}\n{INSTRUCTION}")]

    def grade(self, prediction: str | None, reference: Reference) -> Grade:
        if self.domain == "code":
            return grade_program(self, self.limits, prediction, reference)
        if self.domain == "text":
            return grade_text(prediction, reference)
        return grade_answer(prediction, reference)


def grade_answer(prediction: str | None, reference: Reference) -> Grade:
    """Math and multiple choice: the prediction's answer against the reference's, by the one relation."""
    answer = graded_answer(prediction)
    if answer is None:
        return Grade(correct=False, answer=None, status="no_answer")
    correct = equivalent(answer, reference.answer)
    return Grade(correct=correct, answer=answer, status="correct" if correct else "wrong")


def grade_text(prediction: str | None, reference: Reference) -> Grade:
    """Free-form: the final reply against the label, equal after SQuAD's normalisation (`texts_match`)."""
    answer = final_reply(prediction) if prediction is not None else None
    if answer is None:
        return Grade(correct=False, answer=None, status="no_answer")
    correct = reference.answer is not None and texts_match(answer, reference.answer)
    return Grade(correct=correct, answer=answer, status="correct" if correct else "wrong")


def graded_answer(prediction: str | None) -> str | None:
    """A prediction may be a bare answer or a whole completion: a box, if present, is what counts."""
    if prediction is None:
        return None
    boxed = extract_answer(prediction)
    if boxed is not None:
        return boxed
    if "\\boxed" in prediction or "<think>" in prediction:
        return None  # a malformed box or an unclosed trace: no answer, never a guess
    return prediction.strip() or None


def _label(row: Row, column: str | None) -> str | None:
    """A row's answer as text; None (unlabelled) when the cell is empty or missing; a list or object refused."""
    if column is None:
        return None
    value = row.get(column)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, float):
        if math.isnan(value):
            return None  # a missing cell in a Parquet or pandas-written file
        if math.isinf(value):
            raise UserError(f"{row.where}: answer ({column}) is {value}, not an answer")
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise UserError(f"{row.where}: answer ({column}) must be one value (text or a number), not {value!r:.60}")
    return str(value).strip()


def _index(letter: str) -> int:
    return string.ascii_uppercase.index(letter)


def _choice_letter(row: Row, answer: str, options: list[str]) -> str:
    """A multiple-choice answer as its letter: given as a letter ("B", "(B)"), a 0-based index, or the text of
    one of the options."""
    letters = string.ascii_uppercase[: len(options)]
    bare = answer.strip().strip("()").strip()
    if len(bare) == 1 and bare.upper() in letters:
        return bare.upper()
    if bare.isdigit() and int(bare) < len(options):
        return letters[int(bare)]
    matching = [letters[i] for i, text in enumerate(options) if text == answer.strip()]
    if len(matching) == 1:
        return matching[0]
    raise UserError(
        f"{row.where}: answer '{answer:.60}' is neither a letter, an index nor one of the {len(options)} choices"
    )


_FIELD = re.compile(r"\{(problem|choices)\}")


def fill(template: str, **values: str) -> str:
    """A prompt template is text, not a format string: `{problem}` and `{choices}` are replaced in one pass (a
    statement holding "{choices}" stays as written), every other brace is kept (`\\boxed{}`, JSON, LaTeX)."""
    return _FIELD.sub(lambda found: values[found[1]], template)
