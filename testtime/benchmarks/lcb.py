"""`lcb-v6`: LiveCodeBench code generation, graded in the sandbox with the official semantics.

Source: hub `livecodebench/code_generation_lite` (its JSONL shards; `--bench-opt release=release_v6` is the
cumulative 1,055 problems, the default `v6` the 175 added in v6), or `<data-dir>/lcb-v6.jsonl`. Options:
`release`, `start_date`/`end_date` (inclusive, YYYY-MM-DD), `difficulty`, `platform`, `timeout` (per test,
default 6 s as the official runner), `grader` (`official`, the default: LiveCodeBench's grader, its comparison
and call semantics, its rewrite of a stdin program's main guard, no memory cap beyond the sandbox's; or
`lenient`: a fresh Solution per test, results compared as JSON, every main guard runs, 1 GB; see
`sandbox/judge.py`, `sandbox/harness_job.py`). Problems on the
upstream errata list are flagged. Problems without private tests (the development copy) are graded on their
public tests, and results say so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationInfo, field_validator

from testtime.benchmarks.base import BENCHMARKS, SealedReferences, data_dir, unique_ids
from testtime.benchmarks.code_common import CodeBenchmark, code_prompt
from testtime.benchmarks.lcb_data import ERRATA, HUB_REPO, decode_tests, keep, metadata_of, parse_day, release_shards
from testtime.benchmarks.rows import read_jsonl
from testtime.core.errors import UserError
from testtime.core.jsonl import read_records
from testtime.core.options import Options, flag
from testtime.core.records import Message, Problem, Reference
from testtime.sandbox import Limits


class LCBOptions(Options):
    release: str = flag("v6", "release_v6 (cumulative), v6 (the slice added in v6), vA_vB", "--release")
    start_date: str | None = flag(None, "first contest date, YYYY-MM-DD, inclusive", "--start-date")
    end_date: str | None = flag(None, "last contest date, YYYY-MM-DD, inclusive", "--end-date")
    difficulty: Literal["easy", "medium", "hard"] | None = flag(None, "easy | medium | hard", "--difficulty")
    platform: Literal["atcoder", "leetcode", "codeforces"] | None = flag(
        None, "atcoder | leetcode | codeforces", "--platform"
    )
    timeout: float = flag(6.0, "seconds per test, as the official runner", gt=0)
    grader: Literal["official", "lenient"] = flag(
        "official",
        "official (LiveCodeBench's grader: its comparison, its main-guard rewrite, no memory cap but the "
        "sandbox's) | lenient (a fresh Solution per test, results compared as JSON, any main guard runs, 1 GB)",
    )

    @field_validator("release")
    @classmethod
    def _release(cls, value: str) -> str:
        release_shards(value)  # an unknown release is refused whatever the source
        return value

    @field_validator("start_date", "end_date")
    @classmethod
    def _day(cls, value: str | None, info: ValidationInfo) -> str | None:
        return parse_day(value, info.field_name or "date")


@BENCHMARKS.register("lcb-v6", help="LiveCodeBench code generation (v6 slice; options release, dates, difficulty)")
class LiveCodeBench(CodeBenchmark):
    Options = LCBOptions
    options: LCBOptions

    def __init__(self, data_dir: str | Path | None = None, **options: Any) -> None:
        super().__init__(data_dir, **options)
        o = self.options
        self.release = o.release
        self.filters = {k: getattr(o, k) for k in ("start_date", "end_date", "difficulty", "platform")}
        memory = None if o.grader == "official" else Limits().memory_mb  # the official grader sets no cap
        self.limits = Limits(timeout_s=o.timeout, early_exit=True, grader=o.grader, memory_mb=memory)

    def _rows(self) -> list[dict[str, Any]]:
        folder = data_dir(self.data_dir)
        if folder is not None and self.release != "v6":
            raise UserError(
                f"--release {self.release} chooses hub shards; a --data-dir file ({self.name}.jsonl) holds what it "
                "holds (filter it with --start-date, --end-date, --difficulty, --platform)"
            )
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
            rows += [json.loads(line) for line in read_records(Path(path))]
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
            if not metadata["func_name"] and any(t.testtype == "functional" for t in public + private):
                raise UserError(f"{self.name}: problem {pid} has functional tests but no func_name in its metadata")
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
        return code_prompt(problem)
