"""What TRT's code reflection is shown of the execution selector's runs: per attempt (by the index its text
carries), its verdicts on the public examples (which have expected outputs), and on each model-written
input what it did — its output (and, where the model wrote an expected output, that it was not the one
expected), or how it failed — and whether that agrees with the selected program. "Ran" is not "passed": two
programs that both run but print different things disagree."""

from __future__ import annotations

from testtime.core.selection import CandidateRuns, ExecutionEvidence, TestRun

OUTPUT_CHARS = 80  # each output shown on one line, cut (the evidence keeps 200)


def _behaviour(test: TestRun) -> str:
    if test.verdict not in ("pass", "wrong_answer"):
        return test.verdict  # runtime_error, timeout, ...: the class of failure
    shown = test.output.strip().replace("\n", "\\n")
    return repr(shown[:OUTPUT_CHARS] + ("…" if len(shown) > OUTPUT_CHARS else ""))


def _shown(test: TestRun) -> str:
    """What it did, and where the written test expected another output, that it was not the one expected."""
    return _behaviour(test) + (" (not the expected output)" if test.verdict == "wrong_answer" else "")


def _line(row: CandidateRuns, public: int, reference: CandidateRuns | None, selected: bool) -> str:
    head = f"attempt {row.index}" + (" (selected)" if selected else "")
    examples = row.tests[:public]
    parts = [f"public examples {sum(t.verdict == 'pass' for t in examples)}/{len(examples)} pass"] if public else []
    cells = []
    for j, test in enumerate(row.tests[public:], 1):
        cell = f"input {j}: {_shown(test)}"
        if reference is not None and not selected and len(reference.tests) > public + j - 1:
            same = _behaviour(reference.tests[public + j - 1]) == _behaviour(test)
            cell += " (agrees with selected)" if same else " (differs from selected)"
        cells.append(cell)
    if cells:
        parts.append("; ".join(cells))
    return f"{head}: " + (" | ".join(parts) or "no runs")


def execution_report(evidence: ExecutionEvidence, selected: int | None) -> str:
    """One line per attempt that ran, the selected one first; empty when nothing ran."""
    rows = sorted(evidence.report, key=lambda r: r.index != selected)
    reference = next((r for r in rows if r.index == selected), None)
    return "\n".join(_line(r, evidence.suite.public, reference, r.index == selected) for r in rows)
