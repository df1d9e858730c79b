"""`lcb-v6`: LiveCodeBench code generation, graded in the sandbox with the official semantics.

Source: hub `livecodebench/code_generation_lite` (its JSONL shards; `--bench-opt release=release_v6` is the
cumulative 1,055 problems, the default `v6` the 175 added in v6), or `<data-dir>/lcb-v6.jsonl`. Options:
`release`, `start_date`/`end_date` (inclusive, YYYY-MM-DD), `difficulty`, `platform`, `timeout` (per test,
default 6 s as the official runner), `grader` (`lenient`, the default, or `official`: the official grader's
comparison and call semantics exactly, for headline numbers; see `sandbox/judge.py`). Problems on the
upstream errata list are flagged. Problems without private tests (the development copy) are graded on their
public tests, and results say so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from testtime.benchmarks.base import BENCHMARKS, SealedReferences, data_dir, read_jsonl, unique_ids
from testtime.benchmarks.code_common import CodeBenchmark
from testtime.benchmarks.lcb_data import ERRATA, HUB_REPO, decode_tests, keep, metadata_of, parse_day, release_shards
from testtime.core.errors import UserError
from testtime.core.records import Message, Problem, Reference
from testtime.sandbox import Limits

GRADERS = ("lenient", "official")
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
class LiveCodeBench(CodeBenchmark):
    name = "lcb-v6"

    def __init__(
        self,
        data_dir: str | Path | None = None,
        release: str = "v6",
        start_date: str | None = None,
        end_date: str | None = None,
        difficulty: str | None = None,
        platform: str | None = None,
        timeout: float | str = 6.0,
        grader: str = "lenient",
    ) -> None:
        self.data_dir, self.release = data_dir, release
        self.filters = {
            "start_date": parse_day(start_date, "start_date"),
            "end_date": parse_day(end_date, "end_date"),
            "difficulty": difficulty,
            "platform": platform,
        }
        if difficulty not in (None, "easy", "medium", "hard"):
            raise UserError(f"difficulty must be easy, medium or hard, not '{difficulty}'")
        if grader not in GRADERS:
            raise UserError(f"grader must be {' or '.join(GRADERS)}, not '{grader}'")
        self.limits = Limits(timeout_s=float(timeout), early_exit=True, grader=grader)  # type: ignore[arg-type]

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "release": self.release,
            **self.filters,
            "timeout_s": self.limits.timeout_s,
            "grader": self.limits.grader,
            "data_dir": str(self.data_dir) if self.data_dir else None,
        }

    def _rows(self) -> list[dict[str, Any]]:
        folder = data_dir(self.data_dir)
        if folder is not None:
            return read_jsonl(
                folder / f"{self.name}.jsonl", ("question_id", "question_content"), id_field="question_id"
            )
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
                    metadata={
                        "public_only": not private,
                        "func_name": metadata["func_name"],
                        **({"erratum": ERRATA[pid]} if pid in ERRATA else {}),
                    },
                )
            )
        if not problems:
            raise UserError(f"{self.name}: no problem matches release={self.release} and filters {self.filters}")
        unique_ids([p.id for p in problems], self.name)
        return problems, SealedReferences(references)

    def prompt(self, problem: Problem) -> list[Message]:
        if problem.starter_code:
            form = f"{WITH_STARTER}\n```python\n{problem.starter_code}\n```"
        else:
            form = f"{STDIN}\n```python\n# YOUR CODE HERE\n```"
        answer = "### Answer: (use the provided format with backticks)"
        user = f"### Question:\n{problem.statement}\n\n### Format: {form}\n\n{answer}\n\n"
        return [Message(role="system", content=SYSTEM), Message(role="user", content=user)]
