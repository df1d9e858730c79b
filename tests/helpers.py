"""Builders shared by test modules (importable as `tests.helpers`)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from testtime.core.cache import CompletionCache
from testtime.core.call_policy import RetryPolicy
from testtime.core.checkpoint import RoundCheckpoints
from testtime.core.ledger import Ledger
from testtime.core.records import Message, Problem
from testtime.core.results import ProblemResult
from testtime.core.rollout import RolloutEngine
from testtime.methods import PerProblem
from testtime.methods.plan import ProblemSet, RunBase, settled
from testtime.models import resolve_model
from testtime.models.fake import FakeModel
from testtime.run.engine import method_calls, method_context


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def solve_with(
    method: PerProblem,
    model: FakeModel,
    problem: Problem,
    checkpoints: RoundCheckpoints | None = None,
    base: RunBase | None = None,
) -> tuple[ProblemResult, Ledger]:
    """Solve one problem with a scripted model, in memory (`base`: the run's flags); the result and the ledger."""
    ledger = Ledger()
    base = base or RunBase()
    plan = method.plan(ProblemSet(problem.domain), base)
    ctx = method_context(
        RolloutEngine(model, model_name="fake:", cache=CompletionCache(None), ledger=ledger),
        plan,
        lambda p: [Message(role="user", content=p.statement)],
        base.seed,
        checkpoints=checkpoints,
    )

    async def solve() -> ProblemResult:
        with method_calls(ctx):  # as a run does: a call its plan did not declare, or did not set so, fails
            return await settled(method, plan).solve(problem, ctx)  # as its learner does

    return asyncio.run(solve()), ledger


def api_engine(
    provider: str, urls: list[str], concurrency: int, attempts: int, timeout_s: float = 5.0
) -> RolloutEngine:
    """A rollout engine over an API provider (`openai:…`, `litellm:…`) at these servers: no cache, an in-memory
    ledger, fast retries."""
    model = resolve_model(provider, api_base=urls, request_timeout_s=timeout_s)
    return RolloutEngine(
        model,
        model_name=model.name,
        cache=CompletionCache(None),
        ledger=Ledger(),
        concurrency=concurrency,
        retry=RetryPolicy(max_attempts=attempts, base_delay_s=0.01),
    )


def docs_plugin(name: str, folder: Path) -> Path:
    """docs/plugins.md's example `name` (its ```python title="NAME" block), saved in `folder` as a user would."""
    import re

    page = (Path(__file__).resolve().parents[1] / "docs" / "plugins.md").read_text()
    source = re.search(rf'```python title="{re.escape(name)}"\n(.*?)```', page, re.S)
    assert source, f"docs/plugins.md lost its {name} example"
    plugin = folder / name
    plugin.write_text(source[1])
    return plugin
