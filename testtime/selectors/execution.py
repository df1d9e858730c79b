"""`execution`: choose among candidate programs by running them, without labels.

1. Tests: the problem's public examples (part of the statement, not labels), plus inputs the model writes
   aimed at where candidates disagree (optionally with predicted outputs, weaker evidence).
2. Every candidate runs on every test in the sandbox (run-all).
3. Generated tests are checked: duplicates are dropped before running; inputs that crash every candidate
   are invalid and dropped; tests on which all candidates behave the same cannot discriminate and are
   counted. Candidates are clustered by their behaviour on the remaining generated tests (CodeT/AlphaCode
   style agreement).
4. Score, compared in order: public tests passed; agreement weight = cluster size × the share of kept
   generated tests the candidate ran cleanly (a crash where others ran is evidence of a bug); agreement with
   predicted outputs. Ties go to the earliest candidate and are reported. An empty suite never counts as a
   pass.
The Selection carries the per-candidate, per-test report (TRT's reflection reads it).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from typing import Any

from testtime.core.ledger import LedgerEntry
from testtime.core.records import Candidate, Message, Problem, SamplingParams, Selection, TestCase
from testtime.sandbox import ExecutionReport, Limits
from testtime.sandbox.judge import output_digest
from testtime.selectors import SELECTORS, Selector, prompts

PROGRAM_PREVIEW = 1500


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
    name = "execution"

    def __init__(self, n_inputs: int = 10, predicted_outputs: bool = False, timeout_s: float = 2.0) -> None:
        self.n_inputs = n_inputs
        self.predicted_outputs = predicted_outputs
        self.limits = Limits(timeout_s=timeout_s, early_exit=False)

    def select(self, problem: Problem, candidates: Sequence[Candidate], context: dict[str, Any]) -> Selection:
        return asyncio.run(self.aselect(problem, candidates, context))

    async def aselect(self, problem: Problem, candidates: Sequence[Candidate], context: dict[str, Any]) -> Selection:
        runnable = [c for c in candidates if c.answer]
        rule = f"execution(inputs={self.n_inputs}, predicted_outputs={self.predicted_outputs})"
        if not runnable:
            return Selection(index=None, answer=None, rule=rule, evidence={"reason": "no candidate has code"})
        func_name = problem.metadata.get("func_name")
        testtype = "functional" if func_name else "stdin"
        generated, suite = await self._generate(problem, runnable, context, func_name)
        public = list(problem.public_tests)
        tests = public + [TestCase(input=i, output=None, testtype=testtype) for i, _ in generated]
        sandbox = context["sandbox"]
        programs = list(dict.fromkeys(c.answer for c in runnable if c.answer))  # identical samples run once
        runs = await asyncio.gather(*(sandbox.arun(p, tests, self.limits, func_name) for p in programs))
        if "engine" in context:  # sandbox time is compute too: it goes in the same ledger as the model calls
            for report in runs:
                context["engine"].ledger.record(
                    LedgerEntry(
                        kind="sandbox",
                        problem_id=problem.id,
                        purpose="selection",
                        seconds=report.seconds,
                        step=context.get("step"),
                    )
                )
        by_program: dict[str, ExecutionReport] = dict(zip(programs, runs, strict=True))
        reports = [by_program[c.answer] for c in runnable if c.answer]
        return self._choose(runnable, reports, len(public), generated, suite, rule)

    async def _generate(
        self, problem: Problem, runnable: Sequence[Candidate], context: dict[str, Any], func_name: str | None
    ) -> tuple[list[tuple[str, str | None]], dict[str, int]]:
        suite = {"requested": self.n_inputs, "parsed": 0, "duplicates": 0, "invalid": 0, "non_discriminating": 0}
        if self.n_inputs <= 0 or len({c.answer for c in runnable}) < 2 or "engine" not in context:
            return [], suite  # nothing to discriminate, or no model to ask
        template = prompts.TEST_CASES if self.predicted_outputs else prompts.TEST_INPUTS
        input_format = prompts.FUNCTIONAL_FORMAT.format(func_name=func_name) if func_name else prompts.STDIN_FORMAT
        distinct = list(dict.fromkeys(c.answer for c in runnable if c.answer))[:4]
        programs = "\n\n".join(f"```python\n{program[:PROGRAM_PREVIEW]}\n```" for program in distinct)
        message = template.format(
            statement=problem.statement, programs=programs, count=self.n_inputs, input_format=input_format
        )
        params: SamplingParams = context["params"]
        [completion] = await context["engine"].sample(
            [Message(role="user", content=message)],
            1,
            params,
            problem_id=problem.id,
            purpose="tests",
            step=context.get("step"),
        )
        parsed = parse_generated(completion.text, self.predicted_outputs)
        suite["parsed"] = len(parsed)
        unique: dict[str, str | None] = {}
        for test_input, output in parsed:
            if test_input in unique or any(test_input == t.input for t in problem.public_tests):
                suite["duplicates"] += 1
            else:
                unique[test_input] = output
        return list(unique.items())[: self.n_inputs], suite

    def _choose(
        self,
        runnable: Sequence[Candidate],
        reports: list[ExecutionReport],
        n_public: int,
        generated: list[tuple[str, str | None]],
        suite: dict[str, int],
        rule: str,
    ) -> Selection:
        behaviour = [[_behaviour(t.verdict, t.output_digest) for t in r.tests[n_public:]] for r in reports]
        kept = []
        for j in range(len(generated)):
            column = [b[j] for b in behaviour]
            if all(not cell.startswith("ok:") for cell in column):
                suite["invalid"] += 1  # crashes (or times out) on every candidate: a bad input, not evidence
            elif len(set(column)) == 1:
                suite["non_discriminating"] += 1
            else:
                kept.append(j)
        signatures = [tuple(b[j] for j in kept) for b in behaviour]
        cluster_size = {s: signatures.count(s) for s in signatures}
        scored = []
        for i, report in enumerate(reports):
            public_passed = sum(t.verdict == "pass" for t in report.tests[:n_public])
            clean = sum(behaviour[i][j].startswith("ok:") for j in kept) / len(kept) if kept else 1.0
            predicted = sum(
                1
                for j in kept
                if generated[j][1] is not None
                and behaviour[i][j] == _behaviour("pass", output_digest(generated[j][1] or ""))
            )
            scored.append(((public_passed, round(cluster_size[signatures[i]] * clean, 6), predicted), i))
        best_score = max(score for score, _ in scored)
        winners = [i for score, i in scored if score == best_score]
        chosen = runnable[winners[0]]
        clusters = sorted(set(signatures), key=lambda s: -cluster_size[s])
        return Selection(
            index=chosen.index,
            answer=chosen.answer,
            rule=rule,
            cluster_sizes=tuple(cluster_size[s] for s in clusters),
            majority_ratio=cluster_size[signatures[winners[0]]] / len(runnable),
            tie=len(winners) > 1,
            evidence={
                "suite": {**suite, "public": n_public, "generated": len(generated), "kept": len(kept)},
                "empty_suite": n_public + len(kept) == 0,
                "tied_candidates": [runnable[i].index for i in winners],
                "candidates": [
                    {
                        "index": runnable[i].index,
                        "public_passed": score[0],
                        "cluster_size": cluster_size[signatures[i]],
                        "agreement_weight": score[1],
                        "predicted_agreement": score[2],
                    }
                    for score, i in scored
                ],
                "report": [
                    {
                        "index": c.index,
                        "tests": [{"verdict": t.verdict, "error": t.error, "output": t.output[:200]} for t in r.tests],
                    }
                    for c, r in zip(runnable, reports, strict=True)
                ],
                "generated_inputs": [test_input[:200] for test_input, _ in generated],
            },
        )


def _behaviour(verdict: str, digest: str) -> str:
    """What a candidate did on one input: its output (by digest) when it ran cleanly, else how it failed."""
    return f"ok:{digest}" if verdict == "pass" else verdict
