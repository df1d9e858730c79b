"""What `testtime view` shows, read from run directories: an index (the run table, one row per problem with its
grade and cost) built at once, and a problem's detail (candidates with answers, classes and votes; TRT and
RSA rounds with strategies, knowledge before and after, the reflection's text, refutations and evidence; the
execution verdict matrix for code; TTRL's votes and step curves) built when asked for, so a 500-problem ×
64-sample run opens quickly. Texts come from the run's trace; everything else from its typed records.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from testtime.core.ledger import LedgerEntry, LedgerTotals, read_entries
from testtime.core.records import Problem
from testtime.core.results import ResultRecord, TTRLStep, read_steps
from testtime.core.selection import ExecutionEvidence
from testtime.core.trace import TraceLine, read_trace
from testtime.evaluation.labelfree import confidence
from testtime.evaluation.summary import RunSummary
from testtime.experiments.viewer import explain
from testtime.experiments.viewer.mathml import to_tree
from testtime.run.directory import RunDir
from testtime.run.manifest import RunManifest
from testtime.run.stream import update_steps

TEXT_CHARS = 6000  # a candidate's text as shown; the trace holds it whole
QUESTION_CHARS = 100  # a problem's opening words in the list of problems


@dataclass
class LoadedRun:
    path: Path
    manifest: RunManifest
    summary: RunSummary | None  # None: the run has not finished (or is still running)
    records: dict[str, ResultRecord]
    ledger: list[LedgerEntry]
    calls: dict[str, TraceLine] = field(default_factory=dict)
    blobs: dict[str, str] = field(default_factory=dict)
    steps: list[TTRLStep] = field(default_factory=list)
    reflections: dict[tuple[str, int | None], str] = field(default_factory=dict)
    problems: dict[str, Problem] = field(default_factory=dict)  # empty for a run older than problems.jsonl
    methods: dict[str, str] = field(default_factory=dict)  # a served run: each request's own method
    asked: dict[str, str] = field(default_factory=dict)  # a served run graded later: request → the question's id

    @property
    def uses_labels(self) -> bool:
        """The method trained on the labels (TTRL's oracle reward): every reader must say so."""
        effective = self.manifest.effective
        return bool(self.summary and self.summary.uses_labels) or bool(effective and effective.uses_labels)

    def domain(self, record: ResultRecord) -> str:
        problem = self.problems.get(record.problem_id)
        if problem is not None:
            return problem.domain
        evidence = record.selection.evidence if record.selection else None
        return "code" if record.hidden_tests is not None or isinstance(evidence, ExecutionEvidence) else "math"

    def prompt_text(self, call: str | None) -> str | None:
        """The last user message of a call's prompt."""
        line = self.calls.get(call or "")
        users = [blob for role, blob in line.messages if role == "user"] if line else []
        return self.blobs.get(users[-1]) if users else None


def load_run(path: Path) -> LoadedRun:
    run = RunDir.open_existing(path)
    lines, blobs = read_trace(path)
    return LoadedRun(
        path=path,
        manifest=run.read_manifest(),
        summary=run.read_summary(),
        records={r.problem_id: r for r in run.read_results()},
        ledger=read_entries(run.ledger_path) if run.ledger_path.exists() else [],
        calls={line.call: line for line in lines},
        blobs=blobs,
        steps=read_steps(path / "ttrl" / "steps.jsonl") or update_steps(path),  # offline, or a stream's updates
        problems=run.read_problems(),
        methods=run.served_methods(),
        asked={g.id: g.problem for g in run.read_later_grades().values()},
        reflections={
            (line.problem_id, line.step): blobs.get(line.response, "")
            for line in lines
            if line.purpose == "reflect" and line.response
        },
    )


def _cost(entries: list[LedgerEntry]) -> dict[str, Any]:
    paid = [e for e in entries if e.kind == "model_call" and not e.cached]
    return {
        "calls": len(paid),
        "tokens": sum(e.prompt_tokens + e.completion_tokens for e in paid),
        "cost_usd": None if any(e.cost_usd is None for e in paid) else sum(e.cost_usd or 0.0 for e in paid),
        "sandbox_s": round(sum(e.seconds for e in entries if e.kind == "sandbox"), 3),
    }


def _ledger_so_far(entries: list[LedgerEntry]) -> dict[str, Any]:
    """No summary yet (a run still going, a served run between stops): the totals its ledger holds so far."""
    totals = LedgerTotals.of(entries)
    return {"calls": totals.calls, "tokens": totals.tokens, "cost_usd": totals.cost_usd if totals.cost_known else None}


def index(run: LoadedRun) -> dict[str, Any]:
    by_problem: dict[str, list[LedgerEntry]] = defaultdict(list)
    served = run.manifest.kind == "served"
    for entry in run.ledger:
        if served and entry.purpose.startswith("ttrl_"):
            continue  # a learning server's training rolls out on a request's question: not what answered it
        by_problem[entry.problem_id].append(entry)
    settings, summary = run.manifest.run, run.summary
    shown = (
        summary.model_dump(mode="json", include={"accuracy", "pass_at_1", "ledger", "rounds", "ttrl", "prequential"})
        if summary
        else {}
    )
    if shown.get("ttrl"):
        shown["ttrl"].pop("per_step", None)
    return {
        "name": run.path.name,
        "path": str(run.path),
        "method": summary.method if summary and summary.method else settings.method,  # served: each that answered
        "bench": settings.bench,
        "model": settings.model,
        "method_config": run.manifest.method,
        "uses_labels": run.uses_labels,
        "accuracy": shown.get("accuracy"),
        "pass@1": shown.get("pass@1"),
        "ledger": shown.get("ledger") or _ledger_so_far(run.ledger),
        "rounds": shown.get("rounds"),
        "ttrl": shown.get("ttrl") or {},
        "prequential": shown.get("prequential"),
        "problems": [
            {
                "id": pid,
                "question": _question(run, pid, record),
                "method": run.methods.get(pid, settings.method),
                "correct": record.correct,
                "status": record.status,
                "prediction": (record.graded_answer or record.prediction or "")[:80],
                "confidence": confidence(record),  # label-free: how sure the method was, labelled or not
                "samples": len(record.candidates),
                "rounds": len(record.rounds),
                **_cost(by_problem[pid]),
            }
            for pid, record in _in_problem_order(run)
        ],
        "curves": _curves(run),
    }


def _in_problem_order(run: LoadedRun) -> list[tuple[str, ResultRecord]]:
    """The records in the benchmark's order (problems.jsonl), not the order they finished in."""
    place = {pid: i for i, pid in enumerate(run.problems)}
    return sorted(run.records.items(), key=lambda item: place.get(item[0], len(place)))


def _question(run: LoadedRun, pid: str, record: ResultRecord) -> str:
    """The problem's opening words: its statement, or (a served request, a run before problems.jsonl) the last
    user message of its first call's prompt."""
    problem = run.problems.get(pid)
    text = problem.statement if problem else run.prompt_text(next((c.call for c in record.candidates if c.call), None))
    return " ".join((text or "").split())[:QUESTION_CHARS]


def _curves(run: LoadedRun) -> dict[str, list[Any]]:
    """TTRL's label-free step curves, and the audit's per-step accuracies, for the run page."""
    ttrl = run.summary.ttrl if run.summary else None
    audit = ttrl.per_step if ttrl else None
    return {
        "step": [s.step for s in run.steps],
        "majority_ratio": [s.majority_ratio for s in run.steps],
        "entropy": [s.entropy for s in run.steps],
        "reward": [s.reward for s in run.steps],
        "audit_step": audit.step if audit else [],
        "label_correct": audit.label_correct if audit else [],
        "ground_truth_ratio": audit.ground_truth_ratio if audit else [],
    }


def _text(run: LoadedRun, call: str | None, skip: int = 0) -> dict[str, Any] | None:
    """A call's prompt (its messages after the first `skip`, which the page shows once) and response."""
    line = run.calls.get(call or "")
    if line is None:
        return None
    return {
        "purpose": line.purpose,
        "step": line.step,
        "outcome": line.outcome,
        "shared": skip,
        "messages": [{"role": role, "text": run.blobs.get(blob, "")} for role, blob in line.messages[skip:]],
        "response": run.blobs.get(line.response or "", "") if line.response else "",
    }


def detail(run: LoadedRun, pid: str) -> dict[str, Any]:
    record = run.records[pid]
    selection = record.selection
    domain = run.domain(record)
    classes = {s.index: s for s in selection.scores} if selection else {}
    lines = [run.calls.get(c.call or "") for c in record.candidates]
    shared = explain.shared_prefix(lines)
    first = next((line for line in lines if line is not None), None)
    chosen_call = next((c.call for c in record.candidates if selection and c.index == selection.index), None)
    candidates = [
        {
            "index": c.index,
            "answer": (c.answer or "")[:2000] if c.answer is not None else None,
            "class": classes[c.index].cluster if c.index in classes else None,
            "score": classes[c.index].score if c.index in classes else None,
            "correct": record.sample_correct[i] if i < len(record.sample_correct) else None,
            "status": record.sample_status[i] if i < len(record.sample_status) else None,
            "error": c.error,
            "text": c.text[:TEXT_CHARS],
            "chosen": selection is not None and c.index == selection.index,
            "why": explain.why(record, i, c.answer, c.error, domain),
            "call": _text(run, c.call, shared),
            "token_stats": c.token_stats.model_dump() if c.token_stats else None,
        }
        for i, c in enumerate(record.candidates)
    ]
    audit = record.round_audit
    rounds = []
    for t, rnd in enumerate(record.rounds):
        before = record.rounds[t - 1].knowledge if t else ()
        rounds.append(
            {
                "round": rnd.round,
                "selected": rnd.selected_answer,
                "correct": audit.accuracy[t] if audit and t < len(audit.accuracy) else None,
                "covered": audit.coverage[t] if audit and t < len(audit.coverage) else None,
                "candidates": [c.model_dump() for c in rnd.candidates],
                "knowledge_before": [k.model_dump() for k in before],
                "knowledge_after": [k.model_dump() for k in rnd.knowledge],
                "refutations": [r.model_dump() for r in rnd.refutations],
                "rejected": list(rnd.rejected),
                "next_strategies": [s.model_dump() for s in rnd.strategies],
                "selection": rnd.selection.model_dump(mode="json") if rnd.selection else None,
                "reflection": run.reflections.get((pid, rnd.round)),
            }
        )
    matrix = None
    if selection is not None and isinstance(selection.evidence, ExecutionEvidence):
        evidence = selection.evidence
        matrix = {
            "public": evidence.suite.public,
            "inputs": list(evidence.generated_inputs),
            "rows": [{"index": row.index, "verdicts": [t.verdict for t in row.tests]} for row in evidence.report],
        }
    ttrl = None
    if record.ttrl is not None:
        steps = {s.step: s for s in record.ttrl_audit.steps} if record.ttrl_audit else {}
        ttrl = {
            "test_inputs": list(record.ttrl.test_inputs),
            "votes": [
                {
                    **v.model_dump(mode="json"),
                    "label_correct": steps[v.step].label_correct if v.step in steps else None,
                    "reward_accuracy": steps[v.step].reward_accuracy if v.step in steps else None,
                }
                for v in record.ttrl.votes
            ],
        }
    return {
        "id": pid,
        "domain": domain,
        "statement": explain.statement(
            run.problems.get(pid), run.prompt_text(chosen_call or (first.call if first else None))
        ),
        "reference": explain.reference(record, domain),
        "reference_math": to_tree(record.reference) if domain == "math" and record.reference else None,
        "graded_answer": record.graded_answer,
        "shared_prompt": [{"role": r, "text": run.blobs.get(b, "")} for r, b in first.messages[:shared]]
        if first
        else [],
        "classes": explain.answer_classes(candidates),
        "correct": record.correct,
        "status": record.status,
        "prediction": record.prediction,
        "selection": selection.model_dump(mode="json") if selection else None,
        "candidates": candidates,
        "rounds": rounds,
        "matrix": matrix,
        "ttrl": ttrl,
        "answered_with": record.answered_with.model_dump(mode="json") if record.answered_with else None,
        "calls": _other_calls(run, pid, {c.call for c in record.candidates if c.call}),
    }


def _other_calls(run: LoadedRun, pid: str, candidates: set[str]) -> list[dict[str, Any]]:
    """The problem's calls that made no candidate (a plugin's critique, a judge, a reflection, test writing), each
    with its prompt and reply, in the order they were made."""
    lines = sorted(
        (line for call, line in run.calls.items() if line.problem_id == pid and call not in candidates),
        key=lambda line: line.time,
    )
    return [shown for line in lines if (shown := _text(run, line.call)) is not None]
