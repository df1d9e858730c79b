"""Seeds per (run seed, problem, sample, kind of call): no two problems share a random stream, a run's samples do
not depend on `--concurrency`, and runs written before keep their shared seeds, so their caches still replay."""

from __future__ import annotations

import importlib.util
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from testtime.core.seeds import sample_seed
from testtime.models.mock_server import MockChatServer
from testtime.run.migrate import manifest_to_current

Cli = Callable[..., Any]


def test_a_seed_differs_by_problem_sample_and_kind_and_is_stable() -> None:
    seeds = {
        (problem, sample, kind): sample_seed(0, sample, problem, kind, "per-problem")
        for problem in ("p1", "p2")
        for sample in (0, 1)
        for kind in ("solve", "reflect")
    }
    assert len(set(seeds.values())) == len(seeds)  # eight calls, eight streams
    assert sample_seed(0, 1, "p1", "solve", "per-problem") == seeds[("p1", 1, "solve")]  # reproducible
    assert all(0 <= s < 2**31 for s in seeds.values() if s is not None)
    assert sample_seed(None, 0, "p1", "solve", "per-problem") is None  # no seed: the backend's own randomness
    # the shared scheme, as every run before this one: the problem and the kind play no part
    assert sample_seed(5, 3, "p1", "solve", "shared") == sample_seed(5, 3, "p2", "reflect", "shared") == 5_000_018


def test_a_run_written_before_reads_as_shared_seeds_and_a_new_one_as_per_problem() -> None:
    old = {"schema_version": 2, "kind": "batch", "run": {"method": "majority", "bench": "arith", "model": "fake:"}}
    assert manifest_to_current(old)["run"]["seeds"] == "shared"
    new = {**old, "run": {**old["run"], "seeds": "per-problem"}}
    assert manifest_to_current(new)["run"]["seeds"] == "per-problem"


def _samples(cli: Cli, out: Path, upstream: str, concurrency: int) -> dict[str, list[str]]:
    done = cli("run", "--bench", "arith", "--limit", "4", "--n", "3", "--model", "openai:mock", "--api-base",
               upstream, "--concurrency", str(concurrency), "--seed", "11", "--out", str(out), "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return {r["problem_id"]: [c["text"] for c in r["candidates"]] for r in records}


def test_the_same_run_at_concurrency_1_and_8_draws_the_same_samples_and_problems_draw_apart(
    testtime_cli: Cli, tmp_path: Path
) -> None:
    with MockChatServer(seeded=True, latency_s=0.01) as upstream:
        one = _samples(testtime_cli, tmp_path / "c1", upstream.url, 1)
        eight = _samples(testtime_cli, tmp_path / "c8", upstream.url, 8)
    assert one == eight
    seeds = [re.match(r"\[seed (\d+):", text).group(1) for texts in one.values() for text in texts]  # type: ignore[union-attr]
    assert len(set(seeds)) == 4 * 3  # no two problems (or samples) share a seed


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs the local extra (torch)")
def test_hf_samples_do_not_depend_on_the_concurrency(testtime_cli: Cli, tmp_path: Path, random_model: Path) -> None:
    """Each sample draws from a generator of its own: before, a batch shared one, seeded by its first row."""
    texts = []
    for concurrency in (1, 8):
        out = tmp_path / f"c{concurrency}"
        done = testtime_cli(
            "run", "--bench", "arith", "--limit", "2", "--n", "4", "--max-tokens", "12", "--temperature", "0.9",
            "--concurrency", str(concurrency), "--out", str(out), "--quiet", "--model", f"hf:{random_model}",
            env={"HF_HUB_OFFLINE": "1"}, timeout=900,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        texts.append({r["problem_id"]: [c["text"] for c in r["candidates"]] for r in records})
    assert texts[0] == texts[1]
    assert len({t for samples in texts[0].values() for t in samples}) > 2  # sampled, not greedy copies
