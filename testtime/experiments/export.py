"""`testtime export RUN --format inspect --out FILE`: a run as an inspect_ai eval log, so `inspect view` opens it.

One sample per problem: its input is the prompt that produced the chosen candidate (from the run's trace),
its target what it was graded against (empty only when unlabelled), its output and last message the chosen
candidate's text, its scores this project's grade (C or I, with the graded answer and why; none when
unlabelled) and, labelled or not, `label_free` (the chosen answer's label-free confidence, its vote share and
margin; the log's `label_free` metric is their mean), its events every
call, round and the selection (`inspect_events.py`), its metadata the votes and rounds. The task's generate
config is the solver calls' sampling; task and solver args the benchmark's and method's effective options.
Needs the optional extra: `pip install 'testtime[inspect]'`.
"""

from __future__ import annotations

import os
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from testtime.core.errors import UserError
from testtime.core.results import ResultRecord
from testtime.evaluation.labelfree import confidence
from testtime.experiments.inspect_events import calls_by_problem, generate_config, latencies, messages, sample_events
from testtime.experiments.viewer import explain
from testtime.experiments.viewer.data import LoadedRun, load_run

FORMATS = ("inspect",)


def eval_log(run: LoadedRun) -> Any:
    try:
        from inspect_ai.event import ScoreEvent
        from inspect_ai.log import (
            EvalConfig,
            EvalDataset,
            EvalLog,
            EvalMetric,
            EvalResults,
            EvalSample,
            EvalScore,
            EvalSpec,
            EvalStats,
        )
        from inspect_ai.model import ChatMessageAssistant, ModelOutput, ModelUsage
        from inspect_ai.scorer import Score
    except ImportError:
        raise UserError("exporting to inspect needs inspect_ai: pip install 'testtime[inspect]'") from None
    manifest, summary = run.manifest, run.summary
    settings, model = manifest.run, manifest.run.model
    sampling = manifest.effective.sampling if manifest.effective else {}
    calls, timing = calls_by_problem(run), latencies(run.ledger)
    samples = []
    for pid, record in run.records.items():
        chosen = next((c for c in record.candidates if record.selection and c.index == record.selection.index), None)
        chosen = chosen or (record.candidates[0] if record.candidates else None)
        statement = run.problems[pid].statement if pid in run.problems else pid
        prompt = messages(run, run.calls.get(chosen.call or "") if chosen else None, statement)
        text = chosen.text if chosen else ""
        events, times = sample_events(run, record, calls.get(pid, []), timing)
        domain = run.domain(record)
        target = target_of(record, domain)
        score = None
        if record.correct is not None:  # unlabelled: nothing was graded
            score = Score(
                value="C" if record.correct else "I",
                answer=record.graded_answer,
                explanation=explain.why_prediction(record, domain),
                metadata={"status": record.status},
            )
            events.append(ScoreEvent(score=score, target=target, scorer="testtime"))
        sure = confidence(record)
        label_free = None  # labelled or not: how sure the method was, from its own samples
        if sure is not None:
            selection = record.selection
            label_free = Score(
                value=sure,
                answer=record.prediction,
                explanation=f"label-free confidence of the chosen answer ({selection.selector if selection else '-'})",
                metadata={
                    "vote_share": selection.majority_ratio if selection else None,
                    "margin": selection.margin if selection else None,
                },
            )
            events.append(ScoreEvent(score=label_free, scorer="label_free"))
        samples.append(
            EvalSample(
                id=pid,
                epoch=1,
                input=prompt,
                target=target or "",
                messages=[*prompt, ChatMessageAssistant(content=text)],
                output=ModelOutput.from_content(model=model, content=text),
                scores={name: value for name, value in (("testtime", score), ("label_free", label_free)) if value},
                metadata={
                    "prediction": record.prediction,
                    "status": record.status,
                    "selection": record.selection.model_dump(mode="json") if record.selection else None,
                    "candidates": [{"index": c.index, "answer": c.answer, "error": c.error} for c in record.candidates],
                    "votes": dict(Counter(c.answer for c in record.candidates if c.answer is not None)),
                    "rounds": [{"round": r.round, "selected": r.selected_answer} for r in record.rounds],
                },
                events=events,
                **times,
            )
        )
    ledger = summary.ledger if summary else None
    created = manifest.created or datetime.now(timezone.utc).isoformat()
    metrics = {}
    if summary is not None and summary.accuracy is not None:  # nothing measured: no metric, never a 0
        metrics["accuracy"] = EvalMetric(name="accuracy", value=float(summary.accuracy.mean))
    return EvalLog(
        status="success" if summary is not None and summary.complete else "cancelled",
        eval=EvalSpec(
            created=created,
            # a data file's name, never its path (`--bench /data/x.jsonl` once made "testtime/majority//data/x.jsonl")
            task=f"testtime/{settings.method}/{manifest.benchmark.get('name') or Path(settings.bench).stem}",
            task_args={"bench": settings.bench, **manifest.benchmark},
            solver=settings.method,
            solver_args=manifest.method,
            dataset=EvalDataset(name=settings.bench, samples=len(samples)),
            model=model,
            model_generate_config=generate_config(sampling.get("solve") or next(iter(sampling.values()), None)),
            model_base_url=", ".join(settings.api_base) or None,
            config=EvalConfig(limit=settings.limit, epochs=1),
            metadata={
                "testtime_config": manifest.model_dump(mode="json"),
                "uses_labels": run.uses_labels,
            },
        ),
        results=EvalResults(
            total_samples=len(samples),
            completed_samples=len(samples),
            scores=[
                EvalScore(name="testtime", scorer="testtime", metrics=metrics),
                EvalScore(name="label_free", scorer="label_free", metrics=_confidence_metric(samples, EvalMetric)),
            ],
        ),
        stats=EvalStats(
            started_at=created,
            completed_at=_completed(created, summary.wall_s if summary else None),
            model_usage={
                model: ModelUsage(
                    input_tokens=ledger.prompt_tokens if ledger else 0,
                    output_tokens=ledger.completion_tokens if ledger else 0,
                    total_tokens=ledger.tokens if ledger else 0,
                )
            },
        ),
        samples=samples,
    )


def _confidence_metric(samples: list[Any], metric: Any) -> dict[str, Any]:
    """The mean label-free confidence over the samples that have one (none: no metric, never a 0)."""
    values = [s.scores["label_free"].value for s in samples if "label_free" in s.scores]
    return {"mean": metric(name="mean", value=sum(values) / len(values))} if values else {}


def target_of(record: ResultRecord, domain: str) -> str | None:
    """The sample's target: the reference answer, or what a program had to pass; None when unlabelled."""
    if record.correct is None:
        return None
    if domain == "code":
        return f"a program that passes {explain.reference(record, domain)}"
    return record.reference


def _completed(created: str, wall_s: float | None) -> str:
    if wall_s is None:
        return created
    try:
        return (datetime.fromisoformat(created) + timedelta(seconds=wall_s)).isoformat()
    except ValueError:
        return created


def export(path: Path, out: str | Path, fmt: str = "inspect") -> Path:
    """Write the log to `out`: a file (.eval or .json; any other name gets .eval), or inside a folder (one that
    exists, or a name ending in /) as <run>.eval."""
    if fmt not in FORMATS:
        raise UserError(f"--format must be {' or '.join(FORMATS)}, not '{fmt}'")
    log = eval_log(load_run(path))
    from inspect_ai.log import write_eval_log

    target = Path(out)
    if str(out).endswith(("/", os.sep)) or target.is_dir():
        target.mkdir(parents=True, exist_ok=True)
        target = target / f"{Path(path).resolve().name}.eval"
    elif target.suffix not in (".eval", ".json"):
        target = target.with_suffix(".eval")
    write_eval_log(log, str(target))
    return target
