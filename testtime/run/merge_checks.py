"""What `merge` re-derives from a shard instead of trusting it: every file of a shard can be edited, so each
figure the merged run reports is checked against a record the figure was made from.

- problems: each problem in `problems.jsonl` equals the benchmark's own load of it (statement, tests, metadata);
- answers: each candidate's text is its model call's completion in the cache (by the call id the trace and the
  cache share), its answer is extracted again from that text, and the prediction is the selected candidate's
  answer (a majority vote's winner is one of the largest answer classes);
- tokens: the ledger's paid, successful model calls are the cache's completions, one to one, with the same
  prompt and completion tokens (TTRL's training lines and failed attempts are not in the cache; they are taken
  as recorded).

- selections (`check_selections`): the shard replayed from its own cache into a scratch folder, with its
  recorded method, selector, options and seed: each problem's selection and prediction must be what the replay
  makes of the cached candidates (ties broken by the recorded rule), and every sample the shard answered must
  come back from the cache under its recorded settings; an adaptive vote's record (`--adaptive`: the samples drawn,
  the rule, its threshold, the cap, why it stopped) and its number of candidates must be what the replay's rule
  makes of the cached answers in order.

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


def check_shard(
    path: Path,
    held: list[Problem],
    expected: list[Problem],
    results: list[ResultRecord],
    caps: dict[str, int | None] | None = None,
) -> None:
    """Refuse (one line) a shard whose problems, answers or tokens are not what its records derive. `caps`: the
    token cap of each kind of call (the manifest's sampling), which bounds what a failed attempt may claim."""
    for mine, theirs in zip(held, expected, strict=True):
        if mine != theirs:
            raise UserError(f"{path}: problem {mine.id} differs from the benchmark's own (problems.jsonl was edited)")
    cached = _cached(path / "cache.sqlite")
    problems = {p.id: p for p in expected}
    for result in results:
        _check_answers(path, problems[result.problem_id], result, cached)
    _check_tokens(path, cached, caps or {})


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


def _check_tokens(path: Path, cached: dict[str, Completion], caps: dict[str, int | None]) -> None:
    entries = read_entries(path / "ledger.jsonl")
    _check_failed_lines(path, entries, cached, caps)
    paid = [
        e
        for e in entries
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


def _check_failed_lines(path: Path, entries: list, cached: dict[str, Completion], caps: dict[str, int | None]) -> None:
    """A failed attempt is in no cache, so its tokens are bounded instead: no more completion tokens than its kind
    of call's cap, a prompt no longer than 4 × the longest the shard's cache holds (another kind of call's prompt
    may be longer: a reflection quotes rollouts). A forged failed line of 10^7 tokens once multiplied a merged
    run's tokens by 16,900; a smaller forgery within these bounds passes (docs/scaling.md says so)."""
    longest = max((c.usage.prompt_tokens for c in cached.values()), default=None)
    longest_prompt = None if longest is None else 4 * longest
    for entry in entries:
        if entry.kind != "model_call" or entry.cached or entry.error is None:
            continue
        cap = caps.get(entry.purpose)
        over_cap = cap is not None and entry.completion_tokens > cap
        over_prompt = longest_prompt is not None and entry.prompt_tokens > longest_prompt
        if over_cap or over_prompt:
            raise UserError(
                f"{path}: a failed {entry.purpose} call of problem {entry.problem_id} claims {entry.prompt_tokens:,} + "
                f"{entry.completion_tokens:,} tokens, more than any call of this run could: ledger.jsonl was edited"
            )


def check_selections(path: Path) -> None:
    """Replay the shard from its cache (no model call) and refuse a recorded selection the replay does not make:
    a TRT selection moved to another candidate, a majority tie switched to the other class, a cache whose keys
    are not the recorded settings'. A method that trains (TTRL) is not replayed here."""
    import tempfile

    from testtime.methods import PerProblem
    from testtime.run.directory import RunDir
    from testtime.run.execute import execute
    from testtime.run.lifecycle import replay

    shard = RunDir(path)
    with tempfile.TemporaryDirectory(prefix="testtime-merge-") as scratch:
        opened = replay(path, into=Path(scratch) / "replay")
        try:
            if not isinstance(opened.parts.method, PerProblem):
                return
            execute(opened)
        finally:
            opened.release()
            opened.parts.close()
        again = {r.problem_id: r for r in RunDir(opened.path).read_results()}
    for record in shard.read_results():
        redone = again.get(record.problem_id)
        where = f"{path}: problem {record.problem_id}"
        if redone is None:
            raise UserError(f"{where} was not answered again from the shard's cache")
        lost = [
            c.index for c, d in zip(record.candidates, redone.candidates, strict=False) if c.error is None and d.error
        ]
        if lost:
            raise UserError(
                f"{where}: sample {lost[0]} does not come back from the cache under the recorded settings (its "
                "cache keys are another run's, or config.json was edited)"
            )
        _check_adaptive(where, record, redone)
        if _choice(record) != _choice(redone):
            raise UserError(
                f"{where}: the recorded selection ({_shown(record)}) is not what its selector makes of the cached "
                f"candidates ({_shown(redone)}): results.jsonl was edited"
            )


def _check_adaptive(where: str, record: ResultRecord, redone: ResultRecord) -> None:
    """An adaptive vote's record (`--adaptive`) and its candidates, as the rule replayed over the cached answers in
    order, under the run's own settings, makes them: a forged count, rule, threshold, cap or reason, a record
    removed or added, or candidates cut under an unchanged count would change the merged summary's figures."""
    if len(record.candidates) != len(redone.candidates):
        raise UserError(
            f"{where}: {len(record.candidates)} candidates recorded, but its vote draws {len(redone.candidates)} "
            "from the cache under the recorded settings: results.jsonl was edited"
        )
    mine, theirs = record.adaptive, redone.adaptive
    if mine == theirs:
        return
    if mine is None or theirs is None:
        has = "has no adaptive record" if mine is None else "carries an adaptive record"
        draws = "adaptively" if theirs is not None else "every sample (no --adaptive)"
        raise UserError(f"{where} {has}, but the recorded settings draw {draws}: results.jsonl was edited")
    field = next(name for name in type(mine).model_fields if getattr(mine, name) != getattr(theirs, name))
    raise UserError(
        f"{where}: its adaptive record's {field} ({getattr(mine, field)!r}) is not what the rule replayed over its "
        f"cached answers makes ({getattr(theirs, field)!r}): results.jsonl was edited"
    )


def _choice(record: ResultRecord) -> tuple[object, ...]:
    selection = record.selection
    return record.prediction, selection.index if selection else None, selection.answer if selection else None


def _shown(record: ResultRecord) -> str:
    prediction, index, _ = _choice(record)
    return f"candidate {index}, answer {prediction}"
