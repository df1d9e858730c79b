"""The one place a run's outcome is written, for every kind of run (batch, stream, served, merged shards):
`summary.json` from the results and the ledger's totals (`evaluation.scoring.summarize`), with what the kind of
run adds (TTRL's compute frontier, a stream's prequential accuracy), and `predictions.jsonl`, each answer under
the method that gave it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from testtime.core.ledger import LedgerTotals, read_entries
from testtime.core.results import ResultRecord, TTRLStep
from testtime.evaluation.labelfree import prediction_of
from testtime.evaluation.prequential import prequential
from testtime.evaluation.scoring import summarize
from testtime.evaluation.summary import RunSummary, StreamOrder
from testtime.evaluation.ttrl_compute import ttrl_compute
from testtime.run.directory import RunDir
from testtime.run.settings import RunSettings
from testtime.run.stream import StreamFiles


def write_outcome(
    directory: RunDir,
    settings: RunSettings,
    records: Sequence[ResultRecord],
    totals: LedgerTotals,
    *,
    order: Sequence[str] | None = None,
    methods: dict[str, str] | None = None,
    steps: Sequence[TTRLStep] = (),
    stream_order: StreamOrder | None = None,
    **fields: Any,
) -> RunSummary:
    """Write and return the summary, then the predictions in `order` (problem ids; default: the results').
    `methods`: each problem's own method where it differs by problem (a served run's requests); the summary then
    names every one, the run's own first. `stream_order`: a stream's arrival order, for its prequential accuracy.
    `fields`: the summary's run fields (n, wall_s, complete, stopped, warnings...)."""
    methods = methods or {}
    names = sorted(set(methods.values()) or {settings.method}, key=lambda name: (name != settings.method, name))
    summary = summarize(
        records,
        totals,
        seed=settings.seed,
        steps=steps,
        method="+".join(names),
        bench=fields.pop("bench", settings.bench),
        model=settings.model,
        **fields,
    )
    if summary.ttrl is not None:  # on the compute frontier: the base model's majority at the same tokens
        compute = ttrl_compute(read_entries(directory.ledger_path), list(records), settings.seed)
        summary = summary.model_copy(
            update={
                "ttrl": summary.ttrl.model_copy(update={"compute": compute}),
                "same_budget_majority_n": compute.same_tokens_k,
            }
        )
    if stream_order is not None:
        updates = StreamFiles(directory.path).read_updates()
        summary = summary.model_copy(update={"prequential": prequential(list(records), updates, stream_order)})
    directory.write_summary(summary)
    by_id = {r.problem_id: r for r in records}
    trained = max((s.step for s in steps), default=None)
    directory.write_predictions(
        [
            prediction_of(by_id[pid], methods.get(pid, settings.method), by_id[pid].graded_answer, trained)
            for pid in (order if order is not None else list(by_id))
            if pid in by_id
        ]
    )
    return summary
