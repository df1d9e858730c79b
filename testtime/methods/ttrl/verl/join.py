"""A training on verl joined to the run that evaluates its weights (`run --method ttrl --method-opt verl_run=OUT`).

`testtime ttrl verl --out OUT` trains on a cluster and records each step there (`record.py`); the evaluation
run takes those records as its own, as TTRL on TRL writes them itself: the rollouts, vote-only responses and
training steps up to the evaluated step join its ledger (so its summary's compute counts them), and the
steps with their votes become its `ttrl/steps.jsonl` (so the audit grades every vote against the sealed
references). Joining twice (a resumed evaluation) adds nothing: a line already in the ledger is not added again.
"""

from __future__ import annotations

import os
from pathlib import Path

from testtime.core.errors import UserError
from testtime.core.ledger import Ledger, LedgerEntry, read_entries
from testtime.core.results import read_steps
from testtime.methods.ttrl.verl.record import LEDGER, STEPS


def join_recorded(folder: Path, workdir: Path, ledger: Ledger, up_to: int | None = None) -> int:
    """Take the recorded training (steps up to `up_to`, default all) into the run in `workdir`; its steps."""
    steps = [s for s in read_steps(folder / STEPS) if up_to is None or s.step <= up_to]
    if not steps:
        raise UserError(
            f"{folder} holds no recorded training step ({STEPS}"
            + (f" up to step {up_to}" if up_to is not None else "")
            + "): train first with its launch.sh or submit.sh"
        )
    ours = {_key(e) for e in read_entries(ledger.path)} if ledger.path is not None else set()
    for entry in read_entries(folder / LEDGER):
        if (up_to is None or entry.step is None or entry.step <= up_to) and _key(entry) not in ours:
            ledger.record(entry)
    target = workdir / STEPS
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_suffix(".joining")
    staging.write_text("".join(s.model_dump_json(exclude_none=True) + "\n" for s in steps), encoding="utf-8")
    os.replace(staging, target)
    return len({s.step for s in steps})


def _key(entry: LedgerEntry) -> tuple[object, ...]:
    return (entry.kind, entry.time, entry.problem_id, entry.purpose, entry.sample_index, entry.step)
