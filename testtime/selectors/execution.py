"""`execution`: choose among candidate programs by running them, without labels.

1. Tests: the problem's public examples (part of the statement, not labels), plus inputs the model writes
   aimed at where candidates disagree (optionally with predicted outputs, weaker evidence), or inputs a
   caller wrote beforehand (`ctx.inputs`: TTRL writes them once per problem, not once per step).
2. Every distinct candidate program runs on every test in the sandbox (run-all).
3. Generated tests are checked: duplicates are dropped before running; inputs that crash every candidate
   are invalid and dropped; tests on which all candidates behave the same cannot discriminate and are
   counted. Candidates are clustered by their behaviour on the remaining generated tests (CodeT/AlphaCode
   style agreement); a candidate without code, or whose code does not compile, abstains (no class).
4. Score, compared in order: public tests passed; agreement weight = cluster size × the share of kept
   generated tests the candidate ran cleanly (a crash where others ran is evidence of a bug); agreement with
   predicted outputs. Ties go to the earliest candidate and are reported. An empty suite never counts as a
   pass.
`rank=tests_passed` (TRT's default on code, as its paper describes self-verification): the model writes unit
tests with expected outputs from the specification alone, never shown the candidates; candidates rank by tests
passed (public + written), then by agreement weight, then the earliest. Both figures are recorded per candidate.
The Selection carries the per-candidate, per-test report (TRT's reflection reads it) and the sandbox time.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from testtime.core.ledger import LedgerEntry
from testtime.core.options import Options, flag
from testtime.core.records import Candidate, Message, Problem, TestCase
from testtime.core.selection import (
    CandidateRuns,
    CandidateScore,
    ExecutionCandidate,
    ExecutionEvidence,
    Selection,
    SuiteStats,
    TestMatrix,
    TestRun,
)
from testtime.sandbox import ExecutionReport, Limits, TestVerdict
from testtime.selectors import SELECTORS, SelectionContext, Selector, prompts
from testtime.selectors.matrix import mutual_scores

PROGRAM_PREVIEW = 1500


class ExecutionOptions(Options):
    test_inputs: int = flag(10, "inputs the model writes where candidates disagree", ge=0)
    predicted_outputs: bool = flag(False, "also ask for expected outputs (agreement with them breaks ties)")
    rank: Literal["agreement", "tests_passed", "matrix"] = flag(
        "agreement",
        "agreement: behaviour agreement on model-written inputs (CodeT-like) | tests_passed: unit tests with "
        "expected outputs written from the specification alone, candidates ranked by tests passed (TRT's paper) | "
        "matrix: the same tests and the programs scoring each other by pass counts (CoSPlay-like)",
    )
    timeout_s: float = Field(2.0, gt=0, description="per-test time limit for the candidates")


def parse_generated(text: str, with_outputs: bool) -> list[tuple[str, str | None]]:
    """(input, predicted output) pairs from the model's JSON list; anything malformed yields nothing."""
    match = re.search(r"\[.*\]", text, re.DOTALL)
    if match is None:
        return []
    try:
        items = json.loads(match.group(0))
    except json.JSONDecodeError:
        return []
    pairs: list[tuple[str, str | None]] = []
    for item in items if isinstance(items, list) else []:
        if with_outputs and isinstance(item, dict) and "input" in item:
            output = item.get("output")
            pairs.append((_as_text(item["input"]), None if output is None else _as_text(output)))
        elif not with_outputs and not isinstance(item, dict):
            pairs.append((_as_text(item), None))
    return pairs


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


@SELECTORS.register("execution", help="run candidates on public + model-written tests in the sandbox; agreement")
class ExecutionSelector(Selector):
    Options = ExecutionOptions
    options: ExecutionOptions
    domains = frozenset({"code"})

    @property
    def limits(self) -> Limits:
        return Limits(timeout_s=self.options.timeout_s, early_exit=False)

    def call_kinds(self) -> tuple[str, ...]:
        return ("tests",) if self.options.test_inputs > 0 else ()

    @property
    def rule(self) -> str:
        o = self.options
        if o.rank != "agreement":
            return f"execution(unit_tests={o.test_inputs}, rank={o.rank}, then agreement)"
        return f"execution(inputs={o.test_inputs}, predicted_outputs={o.predicted_outputs})"

    @property
    def unit_tests(self) -> bool:
        """Tests with expected outputs from the specification alone (TRT's paper), not inputs aimed at candidates."""
        return self.options.rank != "agreement"

    async def select(self, problem: Problem, candidates: Sequence[Candidate], ctx: SelectionContext) -> Selection:
        runnable = [c for c in candidates if c.answer]
        if not runnable:
            return self._nothing(candidates, "no candidate has code")
        if ctx.sandbox is None:
            raise ValueError("the execution selector needs a sandbox in its context")
        func_name = problem.metadata.get("func_name")
        testtype = "functional" if func_name else "stdin"
        generated, suite = await self.write_inputs(problem, runnable, ctx)
        public = list(problem.public_tests)
        # a written test's expected output is judged on the host as the grader judges (`7.0` is `7`), never by
        # the text of the output; it never enters the sandbox
        tests = public + [TestCase(input=i, output=out, testtype=testtype) for i, out in generated]
        programs = list(dict.fromkeys(c.answer for c in runnable if c.answer))  # identical samples run once
        runs = await asyncio.gather(*(ctx.sandbox.arun(p, tests, self.limits, func_name) for p in programs))
        seconds = sum(report.seconds for report in runs)
        if ctx.calls is not None:  # sandbox time is compute too: it goes in the same ledger as the model calls
            for report in runs:
                ctx.calls.engine.ledger.record(
                    LedgerEntry(
                        kind="sandbox",
                        problem_id=problem.id,
                        purpose="selection",
                        seconds=report.seconds,
                        step=ctx.step,
                    )
                )
        by_program: dict[str, ExecutionReport] = dict(zip(programs, runs, strict=True))
        reports = {c.index: by_program[c.answer] for c in runnable if c.answer}
        selection = self._choose(candidates, reports, len(public), generated, suite)
        return selection.model_copy(update={"sandbox_seconds": seconds})

    async def inputs_ahead(self, problem: Problem, candidates: Sequence[Candidate], ctx: SelectionContext) -> list[str]:
        written, _ = await self.write_inputs(problem, [c for c in candidates if c.answer], ctx, ahead=True)
        return [test_input for test_input, _ in written]

    async def write_inputs(
        self, problem: Problem, runnable: Sequence[Candidate], ctx: SelectionContext, ahead: bool = False
    ) -> tuple[list[tuple[str, str | None]], SuiteStats]:
        """Test inputs (with predicted outputs, if asked): the caller's, else the model's, deduplicated.
        `ahead`: written for candidates still to come (TTRL), so asked for even if these few agree."""
        n = self.options.test_inputs
        alike = len({c.answer for c in runnable}) < 2 and not ahead
        if ctx.inputs is not None:
            parsed: list[tuple[str, str | None]] = [(i, None) for i in ctx.inputs]
        elif n <= 0 or alike or ctx.calls is None or not ctx.calls.declares("tests"):
            return [], SuiteStats(requested=n)  # nothing to discriminate, or no model to ask
        else:
            func_name = problem.metadata.get("func_name")
            input_format = prompts.FUNCTIONAL_FORMAT.format(func_name=func_name) if func_name else prompts.STDIN_FORMAT
            if self.unit_tests:  # from the specification alone: the candidates are never shown
                message = prompts.UNIT_TESTS.format(statement=problem.statement, count=n, input_format=input_format)
            else:
                template = prompts.TEST_CASES if self.options.predicted_outputs else prompts.TEST_INPUTS
                distinct = list(dict.fromkeys(c.answer for c in runnable if c.answer))[:4]
                programs = (
                    "\n\n".join(f"```python\n{program[:PROGRAM_PREVIEW]}\n```" for program in distinct) or "(none yet)"
                )
                message = template.format(
                    statement=problem.statement, programs=programs, count=n, input_format=input_format
                )
            completion = await ctx.ask("tests", [Message(role="user", content=message)])
            assert completion is not None, "the tests kind is declared: checked above"
            parsed = parse_generated(completion.text, self.options.predicted_outputs or self.unit_tests)
        unique: dict[str, str | None] = {}
        duplicates = 0
        for test_input, output in parsed:
            if test_input in unique or any(test_input == t.input for t in problem.public_tests):
                duplicates += 1
            else:
                unique[test_input] = output
        kept = list(unique.items()) if ctx.inputs is not None else list(unique.items())[:n]
        return kept, SuiteStats(requested=n, parsed=len(parsed), duplicates=duplicates)

    def _nothing(self, candidates: Sequence[Candidate], reason: str) -> Selection:
        return Selection(
            selector=self.name,
            index=None,
            answer=None,
            rule=self.rule,
            scores=tuple(CandidateScore(index=c.index, cluster=None) for c in candidates),
            evidence=ExecutionEvidence(reason=reason),
        )

    def _choose(
        self,
        candidates: Sequence[Candidate],
        reports: dict[int, ExecutionReport],
        n_public: int,
        generated: list[tuple[str, str | None]],
        suite: SuiteStats,
    ) -> Selection:
        compiled = [c for c in candidates if c.index in reports and not _compile_error(reports[c.index])]
        if not compiled:
            return self._nothing(candidates, "no candidate's code compiles")
        behaviour = {c.index: [_behaviour(t) for t in reports[c.index].tests[n_public:]] for c in compiled}
        kept, invalid, uniform = [], 0, 0
        for j in range(len(generated)):
            column = [behaviour[c.index][j] for c in compiled]
            if all(not cell.startswith("ok:") for cell in column):
                invalid += 1  # crashes (or times out) on every candidate: a bad input, not evidence
            elif len(set(column)) == 1:
                uniform += 1
            else:
                kept.append(j)
        signatures = {c.index: tuple(behaviour[c.index][j] for j in kept) for c in compiled}
        classes = sorted(
            set(signatures.values()), key=lambda s: (-list(signatures.values()).count(s), _first(s, signatures))
        )
        size = {s: list(signatures.values()).count(s) for s in classes}
        scored = []
        written = [out is not None for _, out in generated]
        matrix = self._matrix(compiled, reports, n_public, written) if self.options.rank == "matrix" else None
        program_of = {c.index: c.answer for c in compiled}
        for c in compiled:
            tests = reports[c.index].tests
            public_passed = sum(t.verdict == "pass" for t in tests[:n_public])
            clean = sum(behaviour[c.index][j].startswith("ok:") for j in kept) / len(kept) if kept else 1.0
            agrees = [written[j] and tests[n_public + j].verdict == "pass" for j in range(len(generated))]
            predicted = sum(agrees[j] for j in kept)
            unit_passed = sum(agrees)  # every written test with its expected output, discriminating or not
            agreement = round(size[signatures[c.index]] * clean, 6)
            if matrix is not None:  # the matrix's score (its program's row), then agreement, then the earliest
                first = next(f for f in matrix.candidates if program_of[f] == c.answer)
                score = matrix.scores[matrix.candidates.index(first)]
                scored.append(((score, agreement, predicted), c, public_passed + unit_passed))
            elif self.unit_tests:  # tests passed (public + written), then agreement, then the earliest
                scored.append(((public_passed + unit_passed, agreement, predicted), c, public_passed + unit_passed))
            else:
                scored.append(((public_passed, agreement, predicted), c, public_passed + unit_passed))
        best = max(score for score, _, _ in scored)
        winners = [c for score, c, _ in scored if score == best]
        chosen = winners[0]
        by_index = {c.index: score for score, c, _ in scored}
        return Selection(
            selector=self.name,
            index=chosen.index,
            answer=chosen.answer,
            rule=self.rule,
            cluster=classes.index(signatures[chosen.index]),
            cluster_sizes=tuple(size[s] for s in classes),
            majority_ratio=size[signatures[chosen.index]] / len(candidates),
            tie=len({signatures[c.index] for c in winners}) > 1,  # equals of one behaviour are no tie
            scores=tuple(
                CandidateScore(
                    index=c.index,
                    cluster=classes.index(signatures[c.index]) if c.index in signatures else None,
                    score=self._ranked_by(by_index[c.index]) if c.index in by_index else 0.0,
                )
                for c in candidates
            ),
            evidence=ExecutionEvidence(
                suite=suite.model_copy(
                    update={
                        "invalid": invalid,
                        "non_discriminating": uniform,
                        "public": n_public,
                        "generated": len(generated),
                        "kept": len(kept),
                    }
                ),
                empty_suite=n_public + len(kept) == 0,
                tied_candidates=tuple(c.index for c in winners),
                candidates=tuple(
                    ExecutionCandidate(
                        index=c.index,
                        public_passed=sum(t.verdict == "pass" for t in reports[c.index].tests[:n_public]),
                        cluster_size=size[signatures[c.index]],
                        agreement_weight=score[1],
                        predicted_agreement=score[2],
                        tests_passed=passed if self.unit_tests or self.options.predicted_outputs else None,
                    )
                    for score, c, passed in scored
                ),
                report=tuple(
                    CandidateRuns(
                        index=index,
                        tests=tuple(TestRun(verdict=t.verdict, error=t.error, output=t.output[:200]) for t in r.tests),
                    )
                    for index, r in reports.items()
                ),
                generated_inputs=tuple(test_input[:200] for test_input, _ in generated),
                matrix=matrix,
            ),
        )

    def _matrix(
        self, compiled: Sequence[Candidate], reports: dict[int, ExecutionReport], public: int, written: list[bool]
    ) -> TestMatrix:
        """Each distinct program (its first candidate) against the public examples and the written tests with
        expected outputs, and their mutual scores (`matrix.py`); a candidate is its program's row."""
        columns = list(range(public)) + [public + j for j, has in enumerate(written) if has]
        rows: dict[str, int] = {}
        for c in compiled:
            rows.setdefault(c.answer or "", c.index)
        passes = [tuple(reports[index].tests[t].verdict == "pass" for t in columns) for index in rows.values()]
        scores, weights = mutual_scores(passes, public)
        labels = [f"public {t + 1}" for t in range(public)] + [f"written {t - public + 1}" for t in columns[public:]]
        return TestMatrix(
            candidates=tuple(rows.values()),
            tests=tuple(labels),
            passes=tuple(passes),
            weights=tuple(weights),
            scores=tuple(scores),
        )

    def _ranked_by(self, key: tuple[float, ...]) -> float:
        """A candidate's recorded score: what it was ranked by (tests passed; agreement: its weight, after the
        public tests passed, which the evidence records beside it with every other figure)."""
        return float(key[0]) if self.unit_tests else float(key[1])  # tests passed, or the matrix's score


def _compile_error(report: ExecutionReport) -> bool:
    return bool(report.tests) and report.tests[0].compile_error


def _first(signature: tuple[str, ...], signatures: dict[int, tuple[str, ...]]) -> int:
    return min(index for index, s in signatures.items() if s == signature)


def _behaviour(test: TestVerdict) -> str:
    """What a candidate did on one input: its output (by digest) when it ran cleanly, else how it failed."""
    return f"ok:{test.output_digest}" if test.clean else test.verdict
