"""The one place a run's `RolloutEngine` is built, for every kind of run (batch, stream, served, a shard, a
replay): the model behind the run directory's ledger, cache and trace, with the run's retries, budgets,
concurrency, log-probs and seed scheme. Methods get it through their context and never build one; TTRL's trained
weights take its place through `RolloutEngine.with_model`."""

from __future__ import annotations

from typing import Any

from testtime.core.cache import CompletionCache
from testtime.core.ledger import Ledger
from testtime.core.rollout import RetryPolicy, RolloutEngine
from testtime.core.trace import Trace
from testtime.run.directory import RunDir
from testtime.run.settings import RunSettings


def open_engine(settings: RunSettings, model: Any, directory: RunDir, cache_of: RunDir | None = None) -> RolloutEngine:
    """The engine of a run in `directory`; `cache_of`: the run whose cache answers (a replay's source)."""
    return RolloutEngine(
        model,
        model_name=settings.model,
        cache=CompletionCache((cache_of or directory).cache_path),
        ledger=Ledger(directory.ledger_path),
        concurrency=settings.concurrency,
        retry=RetryPolicy(call_timeout_s=settings.request_timeout),
        max_cost_usd=settings.max_cost,
        max_tokens_total=settings.max_tokens_total,
        trace=Trace(directory.path),
        logprobs=settings.logprobs,
        n_per_request=settings.n_per_request,
        seeds=settings.seeds,
    )
