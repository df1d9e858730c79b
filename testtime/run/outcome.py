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
from testtime.run.directory import RunDir, request_methods
from testtime.run.settings import RunSettings
from testtime.run.stream import StreamFiles, update_steps


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


def summarize_served(
    directory: RunDir, settings: RunSettings, n: int | None, totals: LedgerTotals, wall_s: float | None
) -> RunSummary:
    """A served run's summary and predictions over every request it answered, in all its lifetimes (a served run
    continued on its `--out` keeps one ledger), each request under the method it named; graded where labels
    were given later (`testtime grade --run`); one that learns (`serve --method ttrl`) read prequentially."""
    requests = directory.read_requests()  # read once: each request's method, and which ones warned
    learned: dict[str, Any] = (
        {"steps": update_steps(directory.path), "stream_order": "served"} if settings.stream else {}
    )
    return write_outcome(
        directory,
        settings,
        directory.read_results(),
        totals,
        methods=request_methods(requests),
        bench="served",
        n=n,
        wall_s=wall_s,
        complete=True,
        warnings=served_warnings(sum(any("temperature 0" in w for w in r.get("warnings", [])) for r in requests)),
        **learned,
    )


def served_warnings(greedy_requests: int) -> list[str]:
    if not greedy_requests:
        return []
    return [
        f"{greedy_requests} requests drew several samples at temperature 0 (a client's greedy default, as lm-eval "
        "sends): copies of one answer, the selection among them measured nothing; send temperature > 0"
    ]
