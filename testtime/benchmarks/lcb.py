"""`lcb-v6`: LiveCodeBench code generation, graded in the sandbox with the official semantics.

Source: hub `livecodebench/code_generation_lite` (its JSONL shards; `--bench-opt release=release_v6` is the
cumulative 1,055 problems, the default `v6` the 175 added in v6), or `<data-dir>/lcb-v6.jsonl`. Options:
`release`, `start_date`/`end_date` (inclusive, YYYY-MM-DD), `difficulty`, `platform`, `timeout` (per test,
default 6 s as the official runner). Problems on the upstream errata list are flagged. Problems without
private tests (the development copy) are graded on their public tests, and results say so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from testtime.benchmarks.base import BENCHMARKS, Benchmark, Grade, SealedReferences, data_dir, read_jsonl
from testtime.benchmarks.lcb_data import ERRATA, HUB_REPO, decode_tests, keep, metadata_of, release_shards
from testtime.core.errors import UserError
from testtime.core.programs import extract_program
from testtime.core.records import Message, Problem, Reference
from testtime.sandbox import Limits

SYSTEM = (
    "You are an expert Python programmer. You will be given a question (problem specification) and will "
    "generate a correct Python program that matches the specification and passes all tests."
)
WITH_STARTER = (
    "You will use the following starter code to write the solution to the problem and enclose your "
    "code within delimiters."
)
STDIN = (
    "Read the inputs from stdin solve the problem and write the answer to stdout (do not directly test on the "
    "sample inputs). Enclose your code within delimiters as follows. Ensure that when the python program runs, "
    "it reads the inputs, runs the algorithm and writes output to STDOUT."
)


@BENCHMARKS.register("lcb-v6", help="LiveCodeBench code generation (v6 slice; options release, dates, difficulty)")
class LiveCodeBench(Benchmark):
    name = "lcb-v6"
    domain = "code"
    needs_sandbox = True

    def __init__(
        self,
        data_dir: str | Path | None = None,
        release: str = "v6",
        start_date: str | None = None,
        end_date: str | None = None,
        difficulty: str | None = None,
        platform: str | None = None,
        timeout: float | str = 6.0,
    ) -> None:
        self.data_dir, self.release = data_dir, release
        self.filters = {"start_date": start_date, "end_date": end_date, "difficulty": difficulty, "platform": platform}
        if difficulty not in (None, "easy", "medium", "hard"):
            raise UserError(f"difficulty must be easy, medium or hard, not '{difficulty}'")
        self.limits = Limits(timeout_s=float(timeout), early_exit=True)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "release": self.release,
            **self.filters,
            "timeout_s": self.limits.timeout_s,
            "data_dir": str(self.data_dir) if self.data_dir else None,
        }

    def _rows(self) -> list[dict[str, Any]]:
        folder = data_dir(self.data_dir)
        if folder is not None:
            return read_jsonl(folder / f"{self.name}.jsonl", ("question_id", "question_content"))
        try:
            from huggingface_hub import hf_hub_download
        except ImportError:
            raise UserError("loading LiveCodeBench from the hub needs huggingface_hub; or pass --data-dir") from None
        rows = []
        for shard in release_shards(self.release):
            try:
                path = hf_hub_download(HUB_REPO, shard, repo_type="dataset")
            except Exception as exc:  # noqa: BLE001 - offline, gated or renamed: all mean "use --data-dir"
                raise UserError(f"cannot fetch {HUB_REPO}/{shard} ({type(exc).__name__}); pass --data-dir") from None
            rows += [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
        return rows

    def load(self) -> tuple[list[Problem], SealedReferences]:
        problems, references = [], []
        for row in self._rows():
            if not keep(row, **self.filters):
                continue
            pid = str(row["question_id"])
            try:
                public, private = (
                    decode_tests(row.get("public_test_cases")),
                    decode_tests(row.get("private_test_cases")),
                )
            except (ValueError, KeyError, TypeError) as exc:
                raise UserError(f"{self.name}: problem {pid} has undecodable tests ({type(exc).__name__})") from None
            metadata = {k: row.get(k) for k in ("question_title", "platform", "contest_date", "difficulty")}
            metadata["func_name"] = metadata_of(row).get("func_name")
            if pid in ERRATA:
                metadata["erratum"] = ERRATA[pid]
            problems.append(
                Problem(
                    id=pid,
                    domain="code",
                    statement=row["question_content"],
                    starter_code=row.get("starter_code") or "",
                    public_tests=tuple(public),
                    metadata=metadata,
                )
            )
            references.append(
                Reference(
                    problem_id=pid,
                    hidden_tests=tuple(public + private),
                    metadata={"public_only": not private, "func_name": metadata["func_name"]},
                )
            )
        if not problems:
            raise UserError(f"{self.name}: no problem matches release={self.release} and filters {self.filters}")
        return problems, SealedReferences(references)

    def prompt(self, problem: Problem) -> list[Message]:
        if problem.starter_code:
            form = f"{WITH_STARTER}\n```python\n{problem.starter_code}\n```"
        else:
            form = f"{STDIN}\n```python\n# YOUR CODE HERE\n```"
        answer = "### Answer: (use the provided format with backticks)"
        user = f"### Question:\n{problem.statement}\n\n### Format: {form}\n\n{answer}\n\n"
        return [Message(role="system", content=SYSTEM), Message(role="user", content=user)]

    def grade(self, prediction: str | None, reference: Reference) -> Grade:
        program = graded_program(prediction)
        if program is None:
            return Grade(correct=False, answer=None, status="no_code")
        if self.sandbox is None:
            from testtime.sandbox.choose import open_sandbox

            self.sandbox = open_sandbox("auto")
        report = self.sandbox.run(program, reference.hidden_tests, self.limits, reference.metadata.get("func_name"))
        if report.passed:
            return Grade(correct=True, answer=program, status="correct")
        failed = next(t for t in report.tests if t.verdict != "pass")
        return Grade(correct=False, answer=program, status="compile_error" if failed.compile_error else failed.verdict)

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()


def graded_program(prediction: str | None) -> str | None:
    """A prediction may be a bare program or a whole completion: a fenced block, if present, is the program."""
    if prediction is None or not prediction.strip():
        return None
    return extract_program(prediction) if "```" in prediction or "<think>" in prediction else prediction
