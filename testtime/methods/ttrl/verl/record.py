"""TTRL on verl in the run's records: each training step's rollouts, votes and compute, as TTRL on TRL writes them.

At the group barrier (`trainer.py`) every trained response is one `ttrl_rollout` ledger line and every
vote-only response one `ttrl_vote` line (its prompt's tokens and its own, from the attention masks), the
step's optimiser work one `train_step` line (the trained rows' tokens; FLOPs by `trl_backend.py`'s estimate
from the weights' parameter count, null when the count is unknown), and the step one `ttrl/steps.jsonl` line
with its label-free vote statistics and every prompt's vote. They go to `testtime ttrl verl --out`; `run
--method ttrl --method-opt verl_run=OUT` evaluates the trained weights and joins these records to its own, so
`report` sets it beside the other methods at matched compute. Validation batches are not training: nothing
of theirs is recorded. A step verl replays after resuming from a checkpoint is recorded again: its rollouts
were paid again (the audit keeps one vote per problem and step, the last).
"""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from math import prod
from pathlib import Path

from testtime.core.ledger import Ledger, LedgerEntry
from testtime.core.results import TTRLStep, TTRLVote
from testtime.methods.ttrl.monitor import vote_stats
from testtime.methods.ttrl.trl_reward import append_step

LEDGER, STEPS = "ledger.jsonl", Path("ttrl") / "steps.jsonl"


@dataclass(frozen=True)
class Row:
    """One response of a step: its prompt's problem, the prompt's tokens and its own."""

    problem_id: str
    prompt_tokens: int
    completion_tokens: int


@dataclass
class StepRecorder:
    folder: Path
    model: str  # the base weights' name in the ledger (`hf:<path>`), as the run that joins these records names them
    parameters: int | None = None
    beta: float = 0.0  # the KL coefficient: a reference-model forward pass per trained token when above 0
    _clock: float = field(default_factory=time.perf_counter)

    def record(self, step: int, votes: Sequence[TTRLVote], trained: Sequence[Row], vote_only: Sequence[Row]) -> None:
        """One training step: its rollouts and votes in the ledger, its work, then its line in steps.jsonl."""
        now = time.perf_counter()
        seconds, self._clock = now - self._clock, now
        (self.folder / STEPS).parent.mkdir(parents=True, exist_ok=True)
        ledger = Ledger(self.folder / LEDGER)
        try:
            rollout_tokens = self._calls(ledger, step, trained, "ttrl_rollout")
            rollout_tokens += self._calls(ledger, step, vote_only, "ttrl_vote")
            train_tokens = sum(r.prompt_tokens + r.completion_tokens for r in trained)
            flops = None
            if self.parameters is not None:
                flops = 6 * self.parameters * train_tokens + 2 * self.parameters * rollout_tokens
                flops += 2 * self.parameters * train_tokens if self.beta > 0 else 0
            ledger.record(
                LedgerEntry(
                    kind="train_step",
                    model=f"{self.model}+ttrl",
                    purpose="ttrl_update",
                    step=step,
                    seconds=seconds,
                    train_tokens=train_tokens,
                    flops=None if flops is None else float(flops),
                )
            )
        finally:
            ledger.close()
        stepped = [v.model_copy(update={"step": step}) for v in votes]
        append_step(
            self.folder / STEPS, TTRLStep(step=step, seconds=seconds, votes=tuple(stepped), **vote_stats(votes))
        )

    def _calls(self, ledger: Ledger, step: int, rows: Sequence[Row], purpose: str) -> int:
        index: dict[str, int] = {}
        for row in rows:
            index[row.problem_id] = index.get(row.problem_id, -1) + 1
            ledger.record(
                LedgerEntry(
                    model=self.model,
                    problem_id=row.problem_id,
                    purpose=purpose,
                    sample_index=index[row.problem_id],
                    step=step,
                    attempts=1,
                    prompt_tokens=row.prompt_tokens,
                    completion_tokens=row.completion_tokens,
                    cost_usd=0.0,
                )
            )
        return sum(r.prompt_tokens + r.completion_tokens for r in rows)


def safetensors_parameters(folder: Path) -> int | None:
    """The parameter count of a Hugging Face folder's weights, read from the safetensors headers alone (no
    tensor is loaded); None when the folder has none (a hub id, another format)."""
    files = sorted(Path(folder).glob("*.safetensors")) if Path(folder).is_dir() else []
    if not files:
        return None
    total = 0
    for path in files:
        with path.open("rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(size))
        total += sum(prod(t["shape"]) for name, t in header.items() if name != "__metadata__")
    return total
