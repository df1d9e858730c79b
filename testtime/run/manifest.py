"""The run manifest (`config.json`): what a run was asked, what it actually used, with what, and when.

A typed, versioned record that users' scripts and other versions of this project read. `run` holds the
settings as asked (they rebuild the run; `null` = the method's default); `effective` holds what ran: the
sampling each kind of call sent (solve, strategies, reflect, tests, aggregate, TTRL's rollouts and
evaluations), the samples per problem, the problems. `method`, `benchmark` and `model` describe each after
presets and defaults (the selector and its options under `method`). Every resume that changed a setting is
listed in `resumed`; a run merged from shards lists them in `merged_from`. Files written before the schema
was versioned (no `schema_version`) are read through `run.migrate`.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from testtime.core.adaptive import Adaptive
from testtime.core.records import SamplingParams
from testtime.methods.plan import Plan
from testtime.run.settings import RunSettings

SCHEMA_VERSION = 2
# served: `testtime serve`, one problem a request; stream: `run --stream`, problems answered in arrival order
RunKind = Literal["batch", "served", "stream"]


class Effective(BaseModel):
    """What the run used, as the method's plan (`methods/plan.py`) settled it before the first call."""

    model_config = ConfigDict(extra="forbid")

    n: int | None = None  # samples per problem where the method draws a fixed number (None: it does not)
    sampling: dict[str, SamplingParams] = {}  # kind of call → the parameters those calls sent (seeds derive)
    problems: int = 0  # problems loaded after --limit
    planned_calls_per_problem: int | None = None  # model calls one problem costs by construction
    uses_labels: bool = False  # the method read labels (TTRL's oracle reward): never a label-free result
    adaptive: Adaptive | None = None  # --adaptive: how each vote stopped early (None: every vote drew its n)

    @classmethod
    def of(cls, plan: Plan, problems: int) -> Effective:
        return cls(
            n=plan.samples,
            sampling=dict(plan.sampling),
            problems=problems,
            planned_calls_per_problem=plan.calls,
            uses_labels=plan.uses_labels,
            adaptive=plan.adaptive,
        )


class Resumed(BaseModel):
    model_config = ConfigDict(extra="forbid")

    time: str
    changed: dict[str, Any]  # setting → its new value


class RunManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    kind: RunKind = "batch"
    run: RunSettings
    effective: Effective | None = None  # None: written by a version that did not record it
    method: dict[str, Any] = {}
    benchmark: dict[str, Any] = {}
    model: dict[str, Any] | None = None  # None: a replay, which loads no model
    versions: dict[str, str] = {}
    created: str = Field(default_factory=lambda: now())
    resumed: list[Resumed] = []
    merged_from: list[str] = []  # `testtime merge` (or a Ray run): the shard run directories this one joins


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
