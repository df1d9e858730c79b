"""What the code benchmarks share: LiveCodeBench's prompt, and grading a program on the reference's full test
suite in the sandbox.

A prediction may be a bare program or a whole completion (its last fenced block is the program). The suite
runs with early exit, as the official LiveCodeBench grader does; the status is the first failing verdict.
"""

from __future__ import annotations

from testtime.benchmarks.base import Benchmark, Grade
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


def code_prompt(problem: Problem, system: str = SYSTEM) -> list[Message]:
    """LiveCodeBench's generation prompt: the statement, and the starter code or the stdin contract."""
    if problem.starter_code:
        form = f"{WITH_STARTER}\n```python\n{problem.starter_code}\n```"
    else:
        form = f"{STDIN}\n```python\n# YOUR CODE HERE\n```"
    answer = "### Answer: (use the provided format with backticks)"
    user = f"### Question:\n{problem.statement}\n\n### Format: {form}\n\n{answer}\n\n"
    return [Message(role="system", content=system), Message(role="user", content=user)]


def grade_program(benchmark: Benchmark, limits: Limits, prediction: str | None, reference: Reference) -> Grade:
    """Run the graded program on the reference's suite in the benchmark's sandbox (opened on first use)."""
    program = graded_program(prediction)
    if program is None:
        return Grade(correct=False, answer=None, status="no_code")
    if benchmark.sandbox is None:
        from testtime.sandbox.choose import open_sandbox

        benchmark.sandbox = open_sandbox("auto")
    report = benchmark.sandbox.run(program, reference.hidden_tests, limits, reference.metadata.get("func_name"))
    if report.passed:
        return Grade(correct=True, answer=program, status="correct")
    failed = next(t for t in report.tests if t.verdict != "pass")
    return Grade(correct=False, answer=program, status="compile_error" if failed.compile_error else failed.verdict)


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
        return grade_program(self, self.limits, prediction, reference)
