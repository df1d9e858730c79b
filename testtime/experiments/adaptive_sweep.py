"""`testtime ablate adaptive` (and `perf/adaptive.py`): an early-stopping rule at several thresholds, read off one
fixed majority run, as accuracy against tokens.

An adaptive vote's samples are the fixed vote's first ones, seed for seed (`core/adaptive.py`), so walking a rule's
waves over a fixed run's recorded samples is exactly what an adaptive run at that threshold would draw and pick:
one paid run gives the whole curve. (`tests/methods/test_adaptive_vote.py` holds a real adaptive run to its
reading; `perf/adaptive.py` checks it again on the model it measures.)
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from testtime.core.adaptive import FLAGS, Adaptive
from testtime.core.errors import UserError, first_error
from testtime.core.ledger import read_entries
from testtime.core.records import Problem
from testtime.core.results import ResultRecord
from testtime.evaluation.metrics import powers_of_two_upto
from testtime.experiments.curves import Point, plot, point
from testtime.methods.majority import DEFAULT_N
from testtime.run.directory import RunDir
from testtime.run.execute import execute
from testtime.run.lifecycle import create_or_resume, finished_run
from testtime.run.observer import QuietObserver, RunObserver
from testtime.run.settings import RunSettings
from testtime.selectors import SelectionContext, Selector, build_selector


@dataclass
class FixedVotes:
    """A fixed majority run's votes as recorded: every problem's samples in draw order, their tokens, the cap."""

    records: list[ResultRecord]
    tokens: dict[str, list[int]]  # problem → each sample's prompt + completion tokens, by sample index
    cap: int
    majority: Selector = field(default_factory=lambda: build_selector("majority"))  # built once, asked per vote

    @classmethod
    def read(cls, path: Path) -> FixedVotes:
        records = sorted((r for r in RunDir(path).read_results() if r.labelled), key=lambda r: r.problem_id)
        if not records:
            raise UserError(f"{path}: no labelled problem, so no accuracy to place on a curve")
        cap = min(len(r.candidates) for r in records)
        tokens: dict[str, list[int]] = defaultdict(lambda: [0] * cap)
        for e in read_entries(path / "ledger.jsonl"):
            if e.kind == "model_call" and e.purpose == "solve" and e.sample_index < cap:
                tokens[e.problem_id][e.sample_index] = e.prompt_tokens + e.completion_tokens
        return cls(records, dict(tokens), cap)

    def pick(self, record: ResultRecord, k: int, selector: Selector | None = None) -> int | None:
        """The majority selector's pick among the first k samples (a sample's place; None: all abstained)."""
        problem = Problem(id=record.problem_id, domain="math", statement="")
        chosen = asyncio.run((selector or self.majority).select(problem, record.candidates[:k], SelectionContext()))
        return next((i for i, c in enumerate(record.candidates) if c.index == chosen.index), None)

    def stop(self, rule: Adaptive, record: ResultRecord) -> int:
        """The samples `rule` draws for this problem: its waves walked over the recorded samples."""
        answers = [c.answer for c in record.candidates]
        classes = self.majority.vote_classes
        problem = Problem(id=record.problem_id, domain="math", statement="")
        for drawn in rule.schedule(self.cap):
            counted = rule.counted(answers[:drawn], classes(problem, answers[:drawn]) or [])
            if rule.verdict(counted, drawn, self.cap) is not None:
                return drawn
        return self.cap

    def correct(self, drawn: list[int], selector: Selector | None = None) -> list[float]:
        """Per problem, whether the vote over its first `drawn` samples was right (the pick's own grade)."""
        picks = [self.pick(r, k, selector) for r, k in zip(self.records, drawn, strict=True)]
        return [float(p is not None and r.sample_correct[p]) for r, p in zip(self.records, picks, strict=True)]

    def tokens_per_problem(self, drawn: list[int]) -> float:
        spent = sum(sum(self.tokens[r.problem_id][:k]) for r, k in zip(self.records, drawn, strict=True))
        return spent / len(self.records)

    def point(self, series: str, drawn: list[int], selector: Selector | None = None) -> Point:
        return point(series, sum(drawn) / len(drawn), self.tokens_per_problem(drawn), self.correct(drawn, selector))


def sweep_rules(base: RunSettings, thresholds: str) -> list[Adaptive]:
    """The rule of `base` (--adaptive-rule, --adaptive-min, --adaptive-wave) at each of `thresholds` (comma-separated;
    the exact rule has none, so one point), each able to stop a vote of the cap (--n): refused in one line before
    anything is paid otherwise (a threshold the rule cannot take, one given twice, a window wider than the cap)."""
    rule = base.rule()
    if rule.rule == "exact":
        given: list[float | None] = [None]
    else:
        parts = [part.strip() for part in thresholds.split(",")]
        if not any(parts) or not all(parts):
            raise UserError(f"--thresholds expects comma-separated numbers, got '{thresholds}'")
        try:
            given = [float(part) for part in parts]
        except ValueError:
            raise UserError(f"--thresholds expects comma-separated numbers, got '{thresholds}'") from None
        twice = sorted({t for t in given if given.count(t) > 1})
        if twice:
            raise UserError(f"--thresholds: {twice[0]:g} is given twice")
    rules = []
    for threshold in given:
        try:
            each = rule.model_copy(update={"threshold": threshold})
            rules.append(Adaptive.model_validate(each.model_dump()))
        except ValidationError as exc:
            raise UserError(f"--thresholds: {first_error(exc)[1]}") from None
        misfit = each.misfit(base.n or DEFAULT_N)
        if misfit is not None:
            flag = "thresholds" if misfit[0] == "threshold" else FLAGS[misfit[0]].replace("_", "-")
            raise UserError(f"--{flag}: {misfit[1]} (--n)")
    return rules


def sweep(
    base: RunSettings,
    rules: list[Adaptive],
    out: Path,
    observe: Callable[[], RunObserver] = QuietObserver,
) -> tuple[list[Point], list[Path]]:
    """One fixed majority run at the cap (`base.n`) in `out/fixed` (reused when finished, resumed when not), each
    rule (`sweep_rules`) read off it beside majority's own curve; `sweep.json`, `sweep.csv` and two plots."""
    path = out / "fixed"
    out.mkdir(parents=True, exist_ok=True)
    fixed = base.model_copy(update={"method": "majority", "adaptive": False})
    if finished_run(path, fixed) is None:
        summary = execute(create_or_resume(fixed, path), observe())
        if summary.stopped:
            raise UserError(f"the sweep's fixed run stopped ({summary.stopped}); resume it with a larger budget")
    votes = FixedVotes.read(path)
    # majority at k samples by the same vote as the adaptive rows (the selector's pick, ties to the earliest): maj@k
    # with ties shared would put every adaptive point 0.022 below the curve at equal samples from the tie rule alone
    points = [votes.point("majority", [k] * len(votes.records)) for k in powers_of_two_upto(votes.cap)]
    for each in rules:
        label = f"adaptive {each.rule}" + (f" {each.limit:g}" if each.limit is not None else "")
        points.append(votes.point(label, [votes.stop(each, r) for r in votes.records]))
    rows: list[dict[str, Any]] = [p.model_dump() for p in points]
    (out / "sweep.json").write_text(json.dumps(rows, indent=2) + "\n")
    header = "series,samples,tokens,accuracy,ci_low,ci_high,problems\n"
    lines = "".join(
        f"{p.series},{p.rollouts:.2f},{p.tokens:.1f},{p.accuracy:.4f},{p.ci_low:.4f},{p.ci_high:.4f},{p.problems}\n"
        for p in points
    )
    (out / "sweep.csv").write_text(header + lines)
    return points, plot(points, out, f"{base.bench} · {base.model} · adaptive {rules[0].rule}")
