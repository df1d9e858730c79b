"""The execution selector on real programs in the sandbox, with a scripted model writing test inputs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import pytest

from testtime.core.cache import CompletionCache
from testtime.core.calls import Calls
from testtime.core.ledger import Ledger
from testtime.core.records import Candidate, Message, Problem, SamplingParams, TestCase
from testtime.core.rollout import RolloutEngine
from testtime.core.selection import ExecutionEvidence, Selection
from testtime.models.fake import FakeModel
from testtime.sandbox import ExecutionReport, Sandbox
from testtime.selectors import SelectionContext
from testtime.selectors.execution import ExecutionSelector, parse_generated

CORRECT = "print(sum(map(int, input().strip())))"
CORRECT_TOO = "digits = input().strip()\ntotal = 0\nfor d in digits:\n    total += int(d)\nprint(total)"
WRONG = "print(int(input()) % 9)"  # right whenever the digit sum is below 9
SLOW = "import time\ntime.sleep(30)\nprint(0)"
CRASHING = "n = int(input())\nassert n < 50\nprint(sum(map(int, str(n))))"


@pytest.fixture(scope="module")
def sandbox(open_sandbox_or_skip: Sandbox) -> Sandbox:
    return open_sandbox_or_skip


def problem(*public: tuple[str, str]) -> Problem:
    return Problem(
        id="digits",
        domain="code",
        statement="Print the sum of the decimal digits of N.",
        public_tests=tuple(TestCase(input=i, output=o) for i, o in public),
    )


def select(
    sandbox: Sandbox,
    programs: Sequence[str | None],
    model_says: object,
    public: Sequence[tuple[str, str]] = (),
    **options: object,
) -> tuple[Selection, Ledger]:
    text = model_says if isinstance(model_says, str) else json.dumps(model_says)
    ledger = Ledger()
    engine = RolloutEngine(
        FakeModel(lambda messages, params: text), model_name="fake:", cache=CompletionCache(None), ledger=ledger
    )
    candidates = [Candidate(index=i, text="", answer=p) for i, p in enumerate(programs)]
    context = SelectionContext(calls=Calls(engine, {"tests": SamplingParams()}, "p"), sandbox=sandbox)
    selector = ExecutionSelector(timeout_s=0.5, **options)
    return asyncio.run(selector.select(problem(*public), candidates, context)), ledger


def test_public_examples_decide_first(sandbox: Sandbox) -> None:
    selection, _ = select(sandbox, [WRONG, CORRECT], [], public=[("99", "18")])
    assert selection.index == 1 and not selection.tie


def test_agreement_on_generated_inputs_picks_the_larger_cluster(sandbox: Sandbox) -> None:
    selection, ledger = select(sandbox, [WRONG, CORRECT, CORRECT_TOO], ["99", "1234", "7"])
    assert selection.index == 1 and selection.cluster_sizes == (2, 1)
    assert ledger.totals.calls == 1  # the test-writing call is in the ledger
    assert ledger.totals.sandbox_seconds > 0  # and so is the time the candidates ran


def test_an_honest_tie_is_reported(sandbox: Sandbox) -> None:
    selection, _ = select(sandbox, [WRONG, CORRECT], ["99", "48"])
    assert selection.tie and selection.index == 0
    assert isinstance(selection.evidence, ExecutionEvidence) and selection.evidence.tied_candidates == (0, 1)


def test_slow_and_crashing_candidates_lose(sandbox: Sandbox) -> None:
    selection, _ = select(sandbox, [SLOW, CRASHING, CORRECT], ["99", "12"], public=[("5", "5")])
    assert selection.index == 2
    assert isinstance(selection.evidence, ExecutionEvidence)
    verdicts = {row.index: [t.verdict for t in row.tests] for row in selection.evidence.report}
    assert verdicts[0] == ["time_limit"] * 3 and "runtime_error" in verdicts[1]


def test_generated_suites_are_checked(sandbox: Sandbox) -> None:
    # "5" repeats a public input, "12" appears twice, "abc" crashes everyone, "3" every candidate answers alike.
    selection, _ = select(sandbox, [WRONG, CORRECT], ["5", "12", "12", "abc", "3", "99"], public=[("5", "5")])
    assert isinstance(selection.evidence, ExecutionEvidence)
    suite = selection.evidence.suite
    assert (suite.parsed, suite.duplicates, suite.invalid, suite.non_discriminating) == (6, 2, 1, 2)
    assert suite.kept == 1  # only "99" separates the two programs


def test_malformed_test_json_still_selects_on_public_examples(sandbox: Sandbox) -> None:
    selection, _ = select(sandbox, [WRONG, CORRECT], "sure! here are tests: [1, 2", public=[("99", "18")])
    assert isinstance(selection.evidence, ExecutionEvidence)
    assert selection.evidence.suite.parsed == 0 and selection.index == 1


def test_an_empty_suite_is_said_so(sandbox: Sandbox) -> None:
    selection, _ = select(sandbox, [CORRECT, CORRECT_TOO], [])
    assert isinstance(selection.evidence, ExecutionEvidence) and selection.evidence.empty_suite


def test_no_code_means_no_selection(sandbox: Sandbox) -> None:
    selection, _ = select(sandbox, [None, None], ["1"])
    assert selection.index is None and selection.answer is None


def test_predicted_outputs_break_ties(sandbox: Sandbox) -> None:
    tests = [{"input": "99", "output": "18"}, {"input": "48", "output": "12"}]
    selection, _ = select(sandbox, [WRONG, CORRECT], tests, predicted_outputs=True)
    assert selection.index == 1 and not selection.tie
    assert isinstance(selection.evidence, ExecutionEvidence)
    assert selection.evidence.candidates[1].predicted_agreement == 2


@pytest.mark.parametrize(
    ("text", "with_outputs", "expected"),
    [
        ('["1", "2"]', False, [("1", None), ("2", None)]),
        ("```json\n[[1, 2], 3]\n```", False, [("[1, 2]", None), ("3", None)]),
        ('[{"input": "1", "output": "2"}]', True, [("1", "2")]),
        ("no json", False, []),
        ('{"a": 1}', False, []),
    ],
)
def test_parse_generated(text: str, with_outputs: bool, expected: list[tuple[str, str | None]]) -> None:
    assert parse_generated(text, with_outputs) == expected


class NoRun:
    """A sandbox that runs nothing: for tests that look only at the prompt the selector sends."""

    async def arun(self, *args: object) -> ExecutionReport:
        return ExecutionReport(backend="none", tests=[])


def test_the_prompt_names_the_input_format() -> None:
    seen: list[str] = []

    def capture(messages: Sequence[Message], params: SamplingParams) -> str:
        seen.append(messages[-1].content)
        return "[]"

    engine = RolloutEngine(FakeModel(capture), model_name="fake:", cache=CompletionCache(None), ledger=Ledger())
    leetcode = Problem(id="f", domain="code", statement="Add.", metadata={"func_name": "add"})
    candidates = [
        Candidate(index=0, text="", answer="class Solution:\n    def add(self, a, b): return a+b"),
        Candidate(index=1, text="", answer="class Solution:\n    def add(self, a, b): return a-b"),
    ]

    context = SelectionContext(calls=Calls(engine, {"tests": SamplingParams()}, "f"), sandbox=NoRun())  # type: ignore[arg-type]
    asyncio.run(ExecutionSelector(test_inputs=3).select(leetcode, candidates, context))
    assert "one JSON value per line" in seen[0] and "`add`" in seen[0] and "3 test inputs" in seen[0]


def test_identical_programs_run_once_and_still_count_as_agreement(sandbox: Sandbox) -> None:
    class Counting:
        def __init__(self) -> None:
            self.programs: list[str] = []

        async def arun(self, program: str, *args: object) -> object:
            self.programs.append(program)
            return await sandbox.arun(program, *args)  # type: ignore[arg-type]

    counting = Counting()
    selection, _ = select(counting, [WRONG, CORRECT, CORRECT], ["99", "48"])  # type: ignore[arg-type]
    assert sorted(counting.programs) == sorted([WRONG, CORRECT])
    assert selection.index == 1 and selection.cluster_sizes == (2, 1)
    assert isinstance(selection.evidence, ExecutionEvidence) and len(selection.evidence.report) == 3


def test_unit_tests_rank_candidates_by_tests_passed_not_by_agreement(sandbox: Sandbox) -> None:
    """rank=tests_passed (TRT's paper): two wrong programs that agree outvote the one right program under
    agreement; under unit tests with expected outputs, the right one passes more and wins."""
    wrong_too = "n = int(input())\nprint(n % 9)"
    tests = [{"input": "99", "output": "18"}, {"input": "48", "output": "12"}, {"input": "5", "output": "5"}]
    agreed, _ = select(sandbox, [WRONG, wrong_too, CORRECT], tests, predicted_outputs=True)
    assert agreed.index in (0, 1)  # the larger behaviour class
    ranked, _ = select(sandbox, [WRONG, wrong_too, CORRECT], tests, rank="tests_passed")
    assert ranked.index == 2 and isinstance(ranked.evidence, ExecutionEvidence)
    passed = {c.index: c.tests_passed for c in ranked.evidence.candidates}
    assert passed == {0: 1, 1: 1, 2: 3}  # every candidate's count recorded, beside its agreement weight
    assert all(c.agreement_weight > 0 for c in ranked.evidence.candidates)
    assert "rank=tests_passed" in ranked.rule


def test_written_tests_compare_as_the_grader_compares_not_by_text(sandbox: Sandbox) -> None:
    """Expected outputs written as floats (`18.0` for 18) are the grader's equal (Decimal tokens), so the right
    program passes them; by the output's text it passed none, and the wrong majority won."""
    wrong_too = "n = int(input())\nprint(n % 9)"
    tests = [{"input": "99", "output": "18.0"}, {"input": "48", "output": "12.00"}, {"input": "5", "output": "5.0"}]
    ranked, _ = select(sandbox, [WRONG, wrong_too, CORRECT], tests, rank="tests_passed")
    assert ranked.index == 2 and isinstance(ranked.evidence, ExecutionEvidence)
    assert {c.index: c.tests_passed for c in ranked.evidence.candidates} == {0: 1, 1: 1, 2: 3}


def test_a_selections_score_is_what_it_ranked_by(sandbox: Sandbox) -> None:
    """rank=tests_passed: the chosen program's score is its tests passed (3), not its agreement weight (1.0)
    beside 2.0 for the two wrong programs that agree; both figures stay in the evidence."""
    wrong_too = "n = int(input())\nprint(n % 9)"
    tests = [{"input": "99", "output": "18"}, {"input": "48", "output": "12"}, {"input": "5", "output": "5"}]
    ranked, _ = select(sandbox, [WRONG, wrong_too, CORRECT], tests, rank="tests_passed")
    assert {s.index: s.score for s in ranked.scores} == {0: 1.0, 1: 1.0, 2: 3.0}
    assert isinstance(ranked.evidence, ExecutionEvidence)
    assert {c.index: c.agreement_weight for c in ranked.evidence.candidates} == {0: 2.0, 1: 2.0, 2: 1.0}


def test_the_matrix_weighs_a_test_nobody_passes_at_nothing_and_ranks_by_mutual_score(sandbox: Sandbox) -> None:
    """rank=matrix: two wrong programs that agree, one right one, and a written test whose expected output is
    wrong for everyone (weight 0): the right program's score leads; the matrix is recorded, rows × columns."""
    wrong_too = "n = int(input())\nprint(n % 9)"
    tests = [{"input": "99", "output": "18"}, {"input": "48", "output": "12"}, {"input": "5", "output": "5"},
             {"input": "77", "output": "-1"}]  # fmt: skip
    ranked, _ = select(sandbox, [WRONG, wrong_too, CORRECT], tests, rank="matrix")
    assert ranked.index == 2 and isinstance(ranked.evidence, ExecutionEvidence)
    matrix = ranked.evidence.matrix
    assert matrix is not None and matrix.candidates == (0, 1, 2) and len(matrix.tests) == 4
    assert matrix.passes[2] == (True, True, True, False) and matrix.weights[3] == 0.0
    assert max(matrix.scores) == matrix.scores[2] and {s.index: s.score for s in ranked.scores}[2] == matrix.scores[2]
    assert "rank=matrix" in ranked.rule


def test_unit_tests_ties_go_to_agreement_then_the_earliest(sandbox: Sandbox) -> None:
    # the second expected output is wrong for everyone: one test passed each, a tie
    tests = [{"input": "5", "output": "5"}, {"input": "99", "output": "7"}]
    ranked, _ = select(sandbox, [WRONG, CORRECT, CORRECT_TOO], tests, rank="tests_passed")
    assert isinstance(ranked.evidence, ExecutionEvidence)
    assert {c.index: c.tests_passed for c in ranked.evidence.candidates} == {0: 1, 1: 1, 2: 1}
    assert ranked.index == 1  # the larger behaviour class on "99" (18 twice), then its earliest member
    wrong_expected = [{"input": "5", "output": "5"}, {"input": "99", "output": "0"}]
    most, _ = select(sandbox, [WRONG, CORRECT, CORRECT_TOO], wrong_expected, rank="tests_passed")
    assert most.index == 0  # more tests passed beats a larger class: the seed's rule, wrong tests and all


def test_unit_tests_are_written_from_the_specification_alone() -> None:
    seen: list[str] = []

    def capture(messages: Sequence[Message], params: SamplingParams) -> str:
        seen.append(messages[-1].content)
        return "[]"

    engine = RolloutEngine(FakeModel(capture), model_name="fake:", cache=CompletionCache(None), ledger=Ledger())
    candidates = [Candidate(index=0, text="", answer="print(1)"), Candidate(index=1, text="", answer="print(2)")]

    context = SelectionContext(calls=Calls(engine, {"tests": SamplingParams()}, "digits"), sandbox=NoRun())  # type: ignore[arg-type]
    asyncio.run(ExecutionSelector(rank="tests_passed", test_inputs=4).select(problem(), candidates, context))
    assert "sum of the decimal digits" in seen[0] and '"output"' in seen[0] and "4 objects" in seen[0]
    assert "print(1)" not in seen[0] and "print(2)" not in seen[0] and "Candidate" not in seen[0]
