"""A problem's calls as inspect_ai sample events, for `testtime export --format inspect`.

Every call the trace holds for the problem (solver samples, TRT's strategies and reflections, RSA's
aggregations, generated tests) becomes a `ModelEvent` with its messages, output, usage, sampling and
timing; calls of one round or step sit inside a span named for it; each round's outcome and the final
selection with its evidence are `InfoEvent`s; the grade is a `ScoreEvent`. `inspect view` shows them as the
sample's transcript and `events_df` reads them.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timezone
from typing import Any

from testtime.core.ledger import LedgerEntry
from testtime.core.records import SamplingParams
from testtime.core.results import ResultRecord
from testtime.core.trace import TraceLine
from testtime.experiments.viewer.data import LoadedRun

# inspect's stop reasons, from ours
STOP = {"stop": "stop", "length": "max_tokens", "error": "unknown"}


def when(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=timezone.utc)


def messages(run: LoadedRun, line: TraceLine | None, fallback: str = "") -> list[Any]:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

    if line is None:
        return [ChatMessageUser(content=fallback)]
    kinds = {"system": ChatMessageSystem, "user": ChatMessageUser, "assistant": ChatMessageAssistant}
    return [kinds[role](content=run.blobs.get(blob, "")) for role, blob in line.messages]


def generate_config(params: SamplingParams | None) -> Any:
    from inspect_ai.model import GenerateConfig

    if params is None:
        return GenerateConfig()
    return GenerateConfig(
        temperature=params.temperature,
        top_p=params.top_p,
        max_tokens=params.max_tokens,
        seed=params.seed,
        stop_seqs=list(params.stop) or None,
    )


def latencies(entries: list[LedgerEntry]) -> dict[tuple[Any, ...], list[float]]:
    """The ledger's latency of each call, by the key a trace line shares with it, in call order."""
    found: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    for e in entries:
        if e.kind == "model_call":
            found[(e.problem_id, e.purpose, e.step, e.sample_index)].append(e.latency_s)
    return found


def sample_events(
    run: LoadedRun, record: ResultRecord, lines: list[TraceLine], timing: dict[tuple[Any, ...], list[float]]
) -> tuple[list[Any], dict[str, Any]]:
    """The events of one problem, and its usage and times for the sample."""
    from inspect_ai.event import InfoEvent, ModelEvent, SpanBeginEvent, SpanEndEvent
    from inspect_ai.model import ModelOutput, ModelUsage

    sampling = run.manifest.effective.sampling if run.manifest.effective else {}
    model = run.manifest.run.model
    events: list[Any] = []
    usage = ModelUsage()
    working = 0.0
    span: str | None = None
    ordered = sorted(lines, key=lambda line: line.time)
    for line in ordered:
        name = f"round {line.step}" if line.step is not None else None
        if name != span:
            if span is not None:
                events.append(SpanEndEvent(id=span, timestamp=when(line.time)))
            if name is not None:
                events.append(SpanBeginEvent(id=name, name=name, type="round", timestamp=when(line.time)))
            span = name
        seconds = timing[(line.problem_id, line.purpose, line.step, line.sample_index)]
        latency = seconds.pop(0) if seconds else 0.0
        working += latency
        text = run.blobs.get(line.response or "", "") if line.response else ""
        output = ModelOutput.from_content(model=model, content=text, stop_reason=STOP.get(line.finish_reason, "stop"))
        output.usage = ModelUsage(
            input_tokens=line.prompt_tokens,
            output_tokens=line.completion_tokens,
            total_tokens=line.prompt_tokens + line.completion_tokens,
        )
        if line.outcome == "paid":
            usage = usage + output.usage
        events.append(
            ModelEvent(
                model=model,
                input=messages(run, line),
                tools=[],
                tool_choice="none",
                config=generate_config(sampling.get(line.purpose)),
                output=output,
                error=line.error,
                cache="read" if line.outcome == "cached" else None,
                timestamp=when(line.time - latency),  # the trace records a call when it lands
                completed=when(line.time),
                working_time=latency,
                span_id=span,
                metadata={"call": line.call, "purpose": line.purpose, "sample_index": line.sample_index},
            )
        )
    if span is not None:
        events.append(SpanEndEvent(id=span, timestamp=when(ordered[-1].time)))
    for rnd in record.rounds:
        events.append(
            InfoEvent(
                source=f"round {rnd.round}",
                data={
                    "selected": rnd.selected_answer,
                    "answers": [c.answer for c in rnd.candidates],
                    "strategies": [c.strategy for c in rnd.candidates],
                    "knowledge": [k.text for k in rnd.knowledge],
                    "rejected": list(rnd.rejected),
                    "evidence": rnd.selection.model_dump(mode="json") if rnd.selection else None,
                },
            )
        )
    if record.selection is not None:
        events.append(InfoEvent(source="selection", data=record.selection.model_dump(mode="json")))
    times = {
        "started_at": when(ordered[0].time) if ordered else None,
        "completed_at": when(ordered[-1].time) if ordered else None,
        "total_time": round(ordered[-1].time - ordered[0].time, 3) if ordered else None,
        "working_time": round(working, 3),
        "model_usage": {model: usage},
    }
    return events, times


def calls_by_problem(run: LoadedRun) -> dict[str, list[TraceLine]]:
    found: dict[str, list[TraceLine]] = defaultdict(list)
    for line in run.calls.values():
        found[line.problem_id].append(line)
    return found
