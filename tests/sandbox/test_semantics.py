"""LiveCodeBench semantics: real problems from the development data pass, seeded bugs fail as they should."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testtime.core.records import TestCase
from testtime.sandbox import ExecutionReport, Limits, Sandbox

SOLUTIONS = {
    "abc387_a": "a, b = map(int, input().split())\nprint((a + b) ** 2)",
    "abc387_b": "x = int(input())\nprint(sum(i * j for i in range(1, 10) for j in range(1, 10) if i * j != x))",
    "abc388_b": "n, d = map(int, input().split())\nsnakes = [tuple(map(int, input().split())) for _ in range(n)]\n"
    "for k in range(1, d + 1):\n    print(max(t * (l + k) for t, l in snakes))",
    "3708": "class Solution:\n    def zigzagTraversal(self, grid: List[List[int]]) -> List[int]:\n"
    "        cells = []\n        for i, row in enumerate(grid):\n"
    "            cells.extend(row if i % 2 == 0 else row[::-1])\n        return cells[::2]",
    "3731": "class Solution:\n    def subarraySum(self, nums: List[int]) -> int:\n"
    "        return sum(sum(nums[max(0, i - x):i + 1]) for i, x in enumerate(nums))",
}
# Seeded bugs and the verdict each must get on the problem's first public test.
BUGS = {
    "abc387_a": ("a, b = map(int, input().split())\nprint(a * a + b * b)", "wrong_answer"),
    "abc387_b": ("x = int(input())\nwhile True:\n    x += 1", "time_limit"),
    "abc388_b": ("n, d = map(int, input().split())\nprint(snakes)", "runtime_error"),
    "3708": ("class Solution:\n    def zigzagTraversal(self, grid):\n        return grid[0]", "wrong_answer"),
    "3731": ("class Solution:\n    def subarraySum(self, nums):\n        return [0] * 10**9", "memory_limit"),
}


def lcb_problem(shared_data: Path, question_id: str) -> tuple[list[TestCase], str | None]:
    for line in (shared_data / "lcb-v6.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["question_id"] == question_id:
            return [TestCase(**t) for t in row["public_test_cases"]], row["metadata"].get("func_name")
    raise AssertionError(f"{question_id} not in the data")


@pytest.mark.parametrize("grader", ["lenient", "official"])
@pytest.mark.parametrize("question_id", sorted(SOLUTIONS))
def test_correct_programs_pass_their_public_tests(
    backend: Sandbox, shared_data: Path, question_id: str, grader: str
) -> None:
    tests, func_name = lcb_problem(shared_data, question_id)
    report = backend.run(SOLUTIONS[question_id], tests, Limits(grader=grader), func_name=func_name)  # type: ignore[arg-type]
    assert report.passed, report.tests


@pytest.mark.parametrize("question_id", sorted(BUGS))
def test_seeded_bugs_fail_with_the_right_verdict(backend: Sandbox, shared_data: Path, question_id: str) -> None:
    tests, func_name = lcb_problem(shared_data, question_id)
    program, verdict = BUGS[question_id]
    report = backend.run(program, tests[:1], Limits(timeout_s=1.0, memory_mb=512), func_name=func_name)
    assert [t.verdict for t in report.tests] == [verdict]


def run(backend: Sandbox, program: str, inp: str, out: str) -> ExecutionReport:
    return backend.run(program, [TestCase(input=inp, output=out)])


@pytest.mark.parametrize(
    ("printed", "expected", "verdict"),
    [
        ("1.50", "1.5", "pass"),  # exact Decimal equality per token
        ("0.333333", "0.3333333333", "wrong_answer"),  # no tolerance, as the official grader
        ("1 2\\n3", "1 2\n3\n", "pass"),  # trailing whitespace and newlines
        ("1 2", "1 2\n3", "wrong_answer"),  # the line count must match
        ("  7  ", "7", "pass"),
    ],
)
def test_output_comparison_follows_the_official_grader(
    backend: Sandbox, printed: str, expected: str, verdict: str
) -> None:
    assert run(backend, f"print('{printed}')", "", expected).tests[0].verdict == verdict


def test_buffer_io_works_unlike_the_official_mock(backend: Sandbox) -> None:
    program = (
        "import sys\nfirst = sys.stdin.buffer.readline()\nsecond = sys.stdin.buffer.readline()\n"
        "sys.stdout.buffer.write(first.strip() + b' ' + second.strip())"
    )
    assert run(backend, program, "a\nb\n", "a b").passed


@pytest.mark.parametrize(
    ("program", "inputs", "outputs"),
    [
        ("print(input())", ["a\nb", "c\nd"], ["a", "c"]),  # half its input read: the next test's starts afresh
        # half read through the binary reader, whose seek stays within its read-ahead where it can
        ("import sys\nprint(sys.stdin.buffer.readline().strip().decode())", ["a\nb", "c\nd", "e\nf"], ["a", "c", "e"]),
        ("import sys\nprint(sys.stdin.buffer.read().split()[0].decode())", ["x y", "z w"], ["x", "z"]),
        # output left in the buffer when the clock stops a test never reaches the next test's output
        (
            "import sys\nx = input()\nif x == 'hang':\n    sys.stdout.write('LEAK')\n    while True: pass\nprint(x)",
            ["hang", "ok", "fine"],
            ["", "ok", "fine"],
        ),
        ("import sys\nx = input()\nprint(x)\nsys.stdin.close()", ["p", "q"], ["p", "q"]),  # a closed stdin
        ("import sys\nprint(sys.stdin.detach().readline().decode().strip())", ["a\nb", "c"], ["a", "c"]),  # detached
        ("import os\nprint(input(), flush=True)\nos.close(0)\nos.close(1)", ["p", "q"], ["p", "q"]),  # closed fds
        ("import sys, io\nsys.stdout = io.StringIO()\nprint(input())", ["m", "n"], ["", ""]),  # a replaced stdout
        ("import sys\nprint(len(sys.stdin.read()))", ["abcdefgh", "ab", ""], ["8", "2", "0"]),  # a shorter input
        # a test that writes into its stdin (a memfd, writable) leaves nothing in the next test's
        ("import os, sys\nn = len(sys.stdin.read())\nos.write(0, b'JUNK' * 9)\nprint(n)", ["abc", "a"], ["3", "1"]),
    ],
)
def test_every_test_meets_its_own_input_and_an_empty_output(
    backend: Sandbox, program: str, inputs: list[str], outputs: list[str]
) -> None:
    """A job process serves a job's tests one after another; whatever a test did to its streams (read half its
    input, left output unflushed when its time ran out, closed or replaced one), the next starts as the first."""
    tests = [TestCase(input=i, output=o) for i, o in zip(inputs, outputs, strict=True)]
    report = backend.run(program, tests, Limits(timeout_s=1.0))
    assert [v.output.strip() for v in report.tests] == outputs


def test_reports_larger_than_a_pipe_arrive_whole_and_in_order(backend: Sandbox) -> None:
    """Each 300 KB report fills the report pipe several times over: the job process nudges the supervisor to
    drain it, test after test."""
    program = "n = int(input())\nprint(str(n) * 100000)"
    tests = [TestCase(input=str(n), output=str(n) * 100000) for n in range(100, 106)]
    report = backend.run(program, tests, Limits(timeout_s=5.0))
    assert [t.verdict for t in report.tests] == ["pass"] * len(tests)


def test_functional_result_is_the_return_value_not_prints(backend: Sandbox) -> None:
    program = "class Solution:\n    def pair(self, a, b):\n        print('debug', a)\n        return (a, b)"
    report = backend.run(
        program, [TestCase(input="1\n[2]", output="[1, [2]]", testtype="functional")], func_name="pair"
    )
    assert report.passed  # the tuple compares as a list


def test_compile_error_is_flagged(backend: Sandbox) -> None:
    verdict = run(backend, "def broken(:\n", "", "").tests[0]
    assert verdict.verdict == "runtime_error" and verdict.compile_error and "SyntaxError" in (verdict.error or "")


def test_run_all_versus_early_exit(backend: Sandbox) -> None:
    tests = [TestCase(input="1", output="9"), TestCase(input="2", output="2"), TestCase(input="3", output="3")]
    assert [t.verdict for t in backend.run("print(input())", tests).tests] == ["wrong_answer", "pass", "pass"]
    assert len(backend.run("print(input())", tests, Limits(early_exit=True)).tests) == 1


def test_an_empty_suite_never_passes() -> None:
    assert not ExecutionReport(backend="any", tests=[]).passed


OFFICIAL = Limits(grader="official")
FUNCTIONAL = [
    # (returns, expected JSON, lenient verdict, official verdict): the official grader turns only a top-level tuple
    # into a list and compares the value itself; the lenient one compares JSON, where tuples are lists and keys strings
    ("[(i, i) for i in range(n)]", "[[0, 0], [1, 1]]", "pass", "wrong_answer"),
    ("{n: 1}", '{"2": 1}', "pass", "wrong_answer"),
    ("(n, n)", "[2, 2]", "pass", "pass"),
    ("[n, [n]]", "[2, [2]]", "pass", "pass"),
    ("{n}", "[2]", "runtime_error", "wrong_answer"),  # a set: not JSON; officially just unequal to a list
    ("n / 1", "2", "pass", "pass"),  # 2.0 == 2, in both
]


@pytest.mark.parametrize(("returns", "expected", "lenient", "official"), FUNCTIONAL)
def test_functional_comparison_by_grader(
    backend: Sandbox, returns: str, expected: str, lenient: str, official: str
) -> None:
    program = f"class Solution:\n    def f(self, n):\n        return {returns}"
    tests = [TestCase(input="2", output=expected, testtype="functional")]
    assert backend.run(program, tests, func_name="f").tests[0].verdict == lenient
    assert backend.run(program, tests, OFFICIAL, func_name="f").tests[0].verdict == official


def test_the_official_grader_keeps_one_solution_and_module_across_tests(backend: Sandbox) -> None:
    program = (
        "seen = []\nclass Solution:\n    def __init__(self):\n        self.calls = 0\n"
        "    def f(self, x):\n        self.calls += 1\n        seen.append(x)\n        return [self.calls, len(seen)]"
    )
    tests = [TestCase(input=str(i), output="[1, 1]", testtype="functional") for i in range(2)]
    assert [t.verdict for t in backend.run(program, tests, func_name="f").tests] == ["pass", "pass"]
    officially = backend.run(program, tests, OFFICIAL, func_name="f").tests
    assert [t.verdict for t in officially] == ["pass", "wrong_answer"]  # a state bug shows, as it does officially


def test_a_non_zero_exit_after_the_answer_by_grader(backend: Sandbox) -> None:
    program = "print(4)\nraise SystemExit(1)"
    assert run(backend, program, "", "4").tests[0].verdict == "runtime_error"
    assert backend.run(program, [TestCase(input="", output="4")], OFFICIAL).tests[0].verdict == "pass"


def test_numpy_is_there_as_in_the_official_environment(backend: Sandbox) -> None:
    assert run(backend, "import numpy as np\nprint(int(np.arange(4).sum()))", "", "6").passed


MAIN_GUARDS = [
    # (program, lenient verdict, official verdict). The official grader inlines only a final
    # `if __name__ == '__main__':` block and runs the rest as the body of a function in a module named tmp_sol.
    ('def main():\n    print(input())\nif __name__ == "__main__":\n    main()', "pass", "pass"),
    ("def main():\n    print(input())\nif __name__ == '__main__':\n    main()\ndone = True", "pass", "wrong_answer"),
    ("def main():\n    print(input())\nif '__main__' == __name__:\n    main()", "pass", "wrong_answer"),
    (
        "import sys\nn = 0\ndef bump():\n    global n\n    n += 1\nbump()\nprint(sys.stdin.read().strip())",
        "pass",
        "runtime_error",
    ),  # officially `n` is the wrapper's local, so `global n` names nothing
]


@pytest.mark.parametrize(("program", "lenient", "official"), MAIN_GUARDS)
def test_a_stdin_program_is_rewritten_as_the_official_grader_does(
    backend: Sandbox, program: str, lenient: str, official: str
) -> None:
    tests = [TestCase(input="hello\n", output="hello")]
    assert backend.run(program, tests).tests[0].verdict == lenient
    assert backend.run(program, tests, OFFICIAL).tests[0].verdict == official


def test_the_official_grader_sets_no_memory_cap_of_its_own(backend: Sandbox) -> None:
    # 1.2 GB of address space, never touched: over the lenient 1 GB rlimit, under any sandbox's resident bound.
    program = "import mmap\nregion = mmap.mmap(-1, 1200 << 20)\nprint('mapped')"
    tests = [TestCase(input="", output="mapped")]
    assert backend.run(program, tests).tests[0].verdict != "pass"
    assert backend.run(program, tests, Limits(grader="official", memory_mb=None)).tests[0].verdict == "pass"


# A solution that raises the recursion limit and returns a list nested 3,000 deep: its JSON crossed to the host,
# where json.loads and == used to raise RecursionError and end the run (every resume died at the same problem).
DEEP = (
    "import sys\nsys.setrecursionlimit(100000)\nclass Solution:\n    def f(self, n):\n"
    "        value = []\n        for _ in range(3000):\n            value = [value]\n        return value"
)


@pytest.mark.parametrize("grader", ["lenient", "official"])
def test_a_result_nested_3000_deep_gets_a_verdict_on_the_host(backend: Sandbox, grader: str) -> None:
    deep = "[" * 3001 + "]" * 3001
    tests = [
        TestCase(input="2", output=deep, testtype="functional"),
        TestCase(input="2", output="[[]]", testtype="functional"),
    ]
    verdicts = [t.verdict for t in backend.run(DEEP, tests, Limits(grader=grader), func_name="f").tests]
    # lenient: the harness's own json.dumps handles the depth; official: its exact encoding refuses past 100
    assert verdicts == (["pass", "wrong_answer"] if grader == "lenient" else ["runtime_error"] * 2)


def test_forged_deep_json_from_a_job_is_judged_not_raised() -> None:
    from testtime.sandbox.judge import judge

    deep = "[" * 50_000 + "]" * 50_000
    test = TestCase(input="", output=deep, testtype="functional")
    for grader in ("lenient", "official"):
        for observed, verdict in ((deep, "pass"), ("[" * 50_000 + "]" * 49_999, "wrong_answer")):
            raw = {"status": "ok", "result": observed, "seconds": 0.1}
            assert judge(test, raw, functional=True, grader=grader)["verdict"] == verdict


PRELUDE_USES = [  # the prelude's names, found as builtins, wherever a module global would be found
    ("print(gcd(12, 18), floor(2.5), deque([7]).popleft(), bisect_left([1, 3], 2))", "6 2 7 1"),
    ("def f():\n    return int(sqrt(16))\nclass A:\n    x = comb(4, 2)\nprint(f(), A.x, eval('lcm(4, 6)'))", "4 6 12"),
    ("gcd = lambda a, b: 0\nprint(gcd(4, 6))", "0"),  # a name the program binds shadows the prelude's
    ("from math import *\nprint(gcd(4, 6), 'gcd' in globals())", "2 True"),
    ("print('gcd' in dir(__builtins__) or 'gcd' in __builtins__, stdin.readline().strip())", "True x"),
]


@pytest.mark.parametrize(("program", "expected"), PRELUDE_USES)
def test_the_prelude_reaches_programs_as_their_builtins(backend: Sandbox, program: str, expected: str) -> None:
    report = backend.run(program, [TestCase(input="x", output=expected)])
    assert report.passed, report.tests


def test_a_program_that_rewrites_the_prelude_affects_no_later_job(solo: Sandbox) -> None:
    """Every job's process is forked afresh: a builtin replaced by one job is the original in the next."""
    poison = "__builtins__['gcd'] = lambda a, b: -1\n__builtins__['print'] = lambda *a: None\nprint(gcd(4, 6))"
    assert not solo.run(poison, [TestCase(input="", output="2")]).passed
    assert solo.run("print(gcd(4, 6))", [TestCase(input="", output="2")]).passed


# (program, lenient verdict, official verdict), each official verdict as LiveCodeBench's grader gives it: its
# metrics module sets the int-to-string limit to 50,000 digits at import, and `reliability_guard` sets os.fork,
# os.system, os.kill, subprocess.Popen and friends to None before a program runs.
OFFICIAL_LIMITS = [
    ("print(len(str(10**5000)))", "pass", "pass"),  # 5,001 digits: under LiveCodeBench's 50,000
    ("print(len(str(10**60000)))", "pass", "runtime_error"),  # 60,001 digits: over it
    # the child leaves at once: had it printed too, the answer would be twice or once as the race fell
    ("import os\nif os.fork() == 0:\n    os._exit(0)\nprint(len(str(10**5000)))", "pass", "runtime_error"),
    ("import subprocess\nsubprocess.Popen(['true'])\nprint(len(str(10**5000)))", "pass", "runtime_error"),
    ("import os\nos.system('true')\nprint(len(str(10**5000)))", "pass", "runtime_error"),
]


@pytest.mark.parametrize(("program", "lenient", "official"), OFFICIAL_LIMITS)
def test_the_official_grader_enforces_livecodebenchs_limits(
    backend: Sandbox, program: str, lenient: str, official: str
) -> None:
    expected = "5001" if "60000" not in program else "60001"
    tests = [TestCase(input="", output=expected)]
    assert backend.run(program, tests).tests[0].verdict == lenient
    assert backend.run(program, tests, OFFICIAL).tests[0].verdict == official


@pytest.mark.parametrize("grader", ["lenient", "official"])
def test_a_thread_that_outlives_its_test_never_writes_into_the_next(backend: Sandbox, grader: str) -> None:
    """Once: a leftover thread's output landed in the next test, which could pass or fail on it."""
    program = (
        "import threading, time\nx = input()\nprint(x)\n"
        "def later():\n    time.sleep(1.5)\n    print('from an earlier test')\n"
        "threading.Thread(target=later, daemon=True).start()"
    )
    tests = [TestCase(input=str(i), output=str(i)) for i in range(3)]
    report = backend.run(program, tests, Limits(timeout_s=1.0, grader=grader))  # type: ignore[arg-type]
    assert [t.verdict for t in report.tests][:1] == ["runtime_error"], report.tests
    assert all("from an earlier test" not in t.output for t in report.tests)
    quick = program.replace("time.sleep(1.5)", "time.sleep(0.05)")
    finished = backend.run(quick, tests[:1], Limits(timeout_s=1.0, grader=grader))  # type: ignore[arg-type]
    assert finished.tests[0].verdict == "wrong_answer"  # its thread printed within the test: its own output
