"""Every seed a run derives, in one place: a sample's, a step's and slot's, and a problem's own generator.

A resumed run, a replay and a served client that pins `seed` find their samples again only if these formulas
never move: each sample's seed is part of its cache key. Callers never write a formula of their own; they ask
the call handle (`core/calls.py`), which asks here.
"""

from __future__ import annotations

import hashlib
import random
from typing import Literal

SeedScheme = Literal["per-problem", "shared"]


def sample_seed(
    base: int | None, sample_index: int, problem_id: str = "", purpose: str = "solve", scheme: SeedScheme = "shared"
) -> int | None:
    """A reproducible seed per sample (None stays None: the backend's own randomness). `per-problem` derives it
    from (base, problem id, sample index, kind of call), so no two problems or kinds share a random stream;
    `shared` from (base, sample index) alone: runs written before seeds were per problem (their cache keys), and
    served requests, whose client pins `seed` to redraw the same samples whatever the request's id."""
    if base is None:
        return None
    if scheme == "shared":
        return (base * 1_000_003 + sample_index) % 2**31
    digest = hashlib.sha256(f"{base}\x00{problem_id}\x00{sample_index}\x00{purpose}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % 2**31


def slot_seed(seed: int, step: int, slot: int) -> int:
    """The base seed of one call of a multi-step method (its step, and its slot in the step: a rollout's place,
    or a named slot for calls that are not rollouts), so no step replays another from the completion cache."""
    return (seed * 1_000_003 + step * 1009 + slot) % 2**31


def problem_rng(seed: int, problem_id: str, step: int | None = None) -> random.Random:
    """A problem's own generator (a round's shuffle, an aggregation's picks, a tie's draw): the same for the
    same run seed, problem and step, whatever else the run does."""
    return random.Random(f"{seed}-{problem_id}" if step is None else f"{seed}-{problem_id}-{step}")
