"""What `merge` re-derives from a shard instead of trusting it: every file of a shard can be edited, so each
figure the merged run reports is checked against a record the figure was made from.

- problems: each problem in `problems.jsonl` equals the benchmark's own load of it (statement, tests, metadata);
- answers: each candidate's text is its model call's completion in the cache (by the call id the trace and the
  cache share), its answer is extracted again from that text, and the prediction is the selected candidate's
  answer (a majority vote's winner is one of the largest answer classes);
- tokens: the ledger's paid, successful model calls are the cache's completions, one to one, with the same
  prompt and completion tokens (TTRL's training lines and failed attempts are not in the cache; they are taken
  as recorded).

A check that fails refuses the merge with one line naming the shard, the problem and what differs.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from testtime.core.answers.vote import cluster_answers
from testtime.core.errors import UserError
from testtime.core.ledger import read_entries
from testtime.core.records import Candidate, Completion, Problem
from testtime.core.results import ResultRecord
from testtime.core.trace import CALL_ID_LENGTH
from testtime.methods import EXTRACTORS


def check_shard(path: Path, held: list[Problem], expected: list[Problem], results: list[ResultRecord]) -> None:
    """Refuse (one line) a shard whose problems, answers or tokens are not what its records derive."""
    for mine, theirs in zip(held, expected, strict=True):
        if mine != theirs:
            raise UserError(f"{path}: problem {mine.id} differs from the benchmark's own (problems.jsonl was edited)")
    cached = _cached(path / "cache.sqlite")
    problems = {p.id: p for p in expected}
    for result in results:
        _check_answers(path, problems[result.problem_id], result, cached)
    _check_tokens(path, cached)


def _cached(path: Path) -> dict[str, Completion]:
    """The shard's cached completions by call id (the first characters of the cache key, as the trace names them)."""
    if not path.exists():
        return {}
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT key, value FROM completions").fetchall()
    finally:
        db.close()
    return {key[:CALL_ID_LENGTH]: Completion.model_validate_json(value) for key, value in rows}


def _check_answers(path: Path, problem: Problem, result: ResultRecord, cached: dict[str, Completion]) -> None:
    where = f"{path}: problem {problem.id}"
    extract = EXTRACTORS[problem.domain]
    for candidate in result.candidates:
        if candidate.error is not None:
            if candidate.answer is not None:
                raise UserError(f"{where}: candidate {candidate.index} failed but carries an answer")
            continue
        completion = cached.get(candidate.call or "")
        if completion is None or completion.text != candidate.text:
            raise UserError(f"{where}: candidate {candidate.index}'s text is not its model call's in the cache")
        if candidate.answer != extract(candidate.text):
            raise UserError(f"{where}: candidate {candidate.index}'s answer is not the one its text gives")
    chosen = _chosen(result)
    if chosen is not None and result.prediction != chosen.answer:
        raise UserError(f"{where}: the prediction is not the selected candidate's answer")
    selection = result.selection
    if problem.domain == "math" and selection is not None and selection.selector == "majority":
        answers = [c.answer for c in result.candidates]
        clusters = cluster_answers(answers)
        top = max((len(c) for c in clusters), default=0)
        if result.prediction is not None and not any(
            len(c) == top and any(answers[i] == result.prediction for i in c) for c in clusters
        ):
            raise UserError(f"{where}: the prediction is not in the largest answer class of its candidates")


def _chosen(result: ResultRecord) -> Candidate | None:
    """The candidate whose answer the prediction must be: the selected one, or a lone sample's."""
    by_index = {c.index: c for c in result.candidates}
    if result.selection is not None:
        return by_index.get(result.selection.index) if result.selection.index is not None else None
    return result.candidates[0] if len(result.candidates) == 1 else None


def _check_tokens(path: Path, cached: dict[str, Completion]) -> None:
    paid = [
        e
        for e in read_entries(path / "ledger.jsonl")
        if e.kind == "model_call" and not e.cached and e.error is None and not e.purpose.startswith("ttrl_")
    ]
    recorded = (len(paid), sum(e.prompt_tokens for e in paid), sum(e.completion_tokens for e in paid))
    derived = (
        len(cached),
        sum(c.usage.prompt_tokens for c in cached.values()),
        sum(c.usage.completion_tokens for c in cached.values()),
    )
    if recorded != derived:
        raise UserError(
            f"{path}: the ledger's paid calls ({recorded[0]}, {recorded[1]:,} + {recorded[2]:,} tokens) are not the "
            f"cache's completions ({derived[0]}, {derived[1]:,} + {derived[2]:,}): ledger.jsonl was edited"
        )
