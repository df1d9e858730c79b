"""`testtime export RUN --format inspect --out FILE`: a run as an inspect_ai eval log, so `inspect view` opens it.

One sample per problem: its input is the prompt that produced the chosen candidate (from the run's trace),
its output and last message that candidate's text, its score this project's grade (C or I, with the graded
answer and status), and its metadata the selection, every candidate's answer and class, and TRT/RSA rounds.
The target is left empty: references stay sealed in the benchmark and never enter a run directory.
Needs the optional extra: `pip install 'testtime[inspect]'`.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from testtime.core.errors import UserError
from testtime.experiments.viewer.data import LoadedRun, load_run

FORMATS = ("inspect",)


def _messages(run: LoadedRun, call: str | None, fallback: str) -> list[Any]:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

    line = run.calls.get(call or "")
    if line is None:
        return [ChatMessageUser(content=fallback)]
    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
    return [kinds[role](content=run.blobs.get(blob, "")) for role, blob in line.messages]


def eval_log(run: LoadedRun) -> Any:
    try:
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
    settings, summary = run.manifest.run, run.summary
    model = settings.model
    samples = []
    for pid, record in run.records.items():
        chosen = next((c for c in record.candidates if record.selection and c.index == record.selection.index), None)
        chosen = chosen or (record.candidates[0] if record.candidates else None)
        prompt = _messages(run, chosen.call if chosen else None, pid)
        text = chosen.text if chosen else ""
        samples.append(
            EvalSample(
                id=pid,
                epoch=1,
                input=prompt,
                target="",
                messages=[*prompt, ChatMessageAssistant(content=text)],
                output=ModelOutput.from_content(model=model, content=text),
                scores={}
                if record.correct is None  # unlabelled: nothing was graded
                else {
                    "testtime": Score(
                        value="C" if record.correct else "I", answer=record.graded_answer, explanation=record.status
                    )
                },
                metadata={
                    "prediction": record.prediction,
                    "selection": record.selection.model_dump(mode="json") if record.selection else None,
                    "candidates": [{"index": c.index, "answer": c.answer, "error": c.error} for c in record.candidates],
                    "rounds": [{"round": r.round, "selected": r.selected_answer} for r in record.rounds],
                },
            )
        )
    ledger = summary.ledger if summary else None
    created = run.manifest.created or datetime.now(timezone.utc).isoformat()
    metrics = {}
    if summary is not None and summary.accuracy is not None:  # nothing measured: no metric, never a 0
        metrics["accuracy"] = EvalMetric(name="accuracy", value=float(summary.accuracy.mean))
    return EvalLog(
        status="success" if summary is not None and summary.complete else "cancelled",
        eval=EvalSpec(
            created=created,
            task=f"testtime/{settings.method}/{settings.bench}",
            dataset=EvalDataset(name=settings.bench, samples=len(samples)),
            model=model,
            config=EvalConfig(),
            metadata={"testtime_config": run.manifest.model_dump(mode="json")},
        ),
        results=EvalResults(
            total_samples=len(samples),
            completed_samples=len(samples),
            scores=[EvalScore(name="testtime", scorer="testtime", metrics=metrics)],
        ),
        stats=EvalStats(
            started_at=created,
            completed_at=created,
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


def export(path: Path, out: Path, fmt: str = "inspect") -> Path:
    if fmt not in FORMATS:
        raise UserError(f"--format must be {' or '.join(FORMATS)}, not '{fmt}'")
    log = eval_log(load_run(path))
    from inspect_ai.log import write_eval_log

    out = out if out.suffix in (".eval", ".json") else out.with_suffix(".eval")
    write_eval_log(log, str(out))
    return out
