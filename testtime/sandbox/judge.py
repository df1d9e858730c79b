"""Judging on the host: a test's verdict from what the program did in the sandbox and the expected output.

Expected outputs never enter the sandbox (see the threat model in `testtime.sandbox`); the harness reports
each test's status, what the program printed or returned, and its time, and this module compares.

Comparison follows the official LiveCodeBench grader: stdin tests compare stripped lines (equal count), each
line exactly or as whitespace-split tokens with exact Decimal equality. Functional tests: `lenient` (the
default) compares the JSON value of the call's result with the expected JSON, so nested tuples are lists
and integer keys strings; `official` compares the returned value itself, a top-level tuple made a list and
nothing else, with the expected JSON (`prediction == expected`, as `lcb_runner/evaluation/testing_util.py`).
Both compare values of any depth without recursion (`deepjson.py`).
"""

from __future__ import annotations

import hashlib
from decimal import Decimal, InvalidOperation
from typing import Any

from testtime.core.records import TestCase
from testtime.sandbox import deepjson

OUTPUT_PREVIEW = 1000


def lines_match(actual: str, expected: str) -> bool:
    got = actual.strip().split("\n")
    want = expected.strip().split("\n")
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        g, w = g.strip(), w.strip()
        if g == w:
            continue
        g_tokens, w_tokens = g.split(), w.split()
        if len(g_tokens) != len(w_tokens):
            return False
        try:
            if any(Decimal(a) != Decimal(b) for a, b in zip(g_tokens, w_tokens, strict=True)):
                return False
        except InvalidOperation:
            return False
    return True


def output_digest(text: str) -> str:
    """Hash of the whole normalised output, for clustering candidates by behaviour."""
    normal = "\n".join(line.strip() for line in text.strip().split("\n"))
    return hashlib.sha256(normal.encode()).hexdigest()[:16]


def matches(observed: str, test: TestCase, grader: str = "lenient") -> bool:
    """Whether a clean run's output (stdout, or the functional result's JSON) is what the test expects."""
    if test.output is None:
        return True  # an input without an expected output: it ran; selectors compare the outputs
    if test.testtype == "functional":
        # Any depth: what came back is of the program's making (deepjson's docstring).
        try:
            expected, returned = deepjson.loads(test.output), deepjson.loads(observed)
        except ValueError:
            return False
        if grader == "official":
            return deepjson.official_equal(returned, expected)
        return deepjson.equal(returned, expected)
    return lines_match(observed, test.output)


def judge(test: TestCase, raw: dict[str, Any], functional: bool, grader: str = "lenient") -> dict[str, Any]:
    """One TestVerdict's fields from the harness's raw result for `test`."""
    status = raw["status"]
    observed = (raw.get("result") or "") if functional else raw.get("stdout", "")
    # a SystemExit before the call returns nothing
    returned = status == "ok" and (not functional or raw.get("result") is not None)
    if status == "ok":
        verdict = "pass" if returned and matches(observed, test, grader) else "wrong_answer"
    else:
        verdict = "runtime_error" if status == "compile_error" else status
    return {
        "verdict": verdict,
        "seconds": round(float(raw.get("seconds", 0.0)), 4),
        "error": raw.get("error"),
        "compile_error": status == "compile_error",
        "output": observed[:OUTPUT_PREVIEW],
        "output_digest": output_digest(observed),
        "clean": returned,
    }
