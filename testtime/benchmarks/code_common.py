"""What the code benchmarks share: grading a program on the reference's full test suite in the sandbox.

A prediction may be a bare program or a whole completion (its last fenced block is the program). The suite
runs with early exit, as the official LiveCodeBench grader does; the status is the first failing verdict.
"""

from __future__ import annotations

from testtime.benchmarks.base import Benchmark, Grade
from testtime.core.programs import extract_program
from testtime.core.records import Reference
from testtime.sandbox import Limits


def graded_program(prediction: str | None) -> str | None:
    """A prediction may be a bare program or a whole completion: a fenced block, if present, is the program."""
    if prediction is None or not prediction.strip():
        return None
    return extract_program(prediction) if "```" in prediction or "<think>" in prediction else prediction


class CodeBenchmark(Benchmark):
    domain = "code"
    needs_sandbox = True
    limits = Limits(timeout_s=6.0, early_exit=True)

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
