"""RSA: N·T generations, K distinct candidates per aggregation, a vote on the final population, resume."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.helpers import solve_with
from testtime.core.checkpoint import RoundCheckpoints
from testtime.core.errors import UserError
from testtime.core.ledger import Ledger
from testtime.core.records import Message, Problem, SamplingParams
from testtime.core.results import ProblemResult
from testtime.methods.plan import ProblemSet, RunBase
from testtime.methods.rsa import RSA
from testtime.models.fake import FakeModel

PROBLEM = Problem(id="p", domain="math", statement="What is 6 * 7?")


def scripted() -> tuple[FakeModel, list[str]]:
    prompts: list[str] = []
    counter = iter(range(10**6))

    def answer(messages: Sequence[Message], params: SamplingParams) -> str:
        prompts.append(messages[-1].content)
        n = next(counter)
        return f"sample {n}: \\boxed{{{42 if n % 3 else 41}}}"

    return FakeModel(answer), prompts


def run(
    model: FakeModel, checkpoints: RoundCheckpoints | None = None, **options: object
) -> tuple[ProblemResult, Ledger]:
    return solve_with(RSA(**options), model, PROBLEM, checkpoints)  # type: ignore[arg-type]


def test_costs_n_times_t_and_aggregates_k_distinct_candidates() -> None:
    model, prompts = scripted()
    result, ledger = run(model, population=4, aggregate=3, steps=3)
    assert ledger.totals.calls == 4 * 3
    aggregations = [p for p in prompts if "Candidate solutions" in p]
    assert len(aggregations) == 4 * 2
    for prompt in aggregations:
        shown = re.findall(r"sample (\d+):", prompt)
        assert len(shown) == 3 and len(set(shown)) == 3  # K members drawn without replacement
    assert len(result.candidates) == 4 and [r.round for r in result.rounds] == [1, 2, 3]
    assert result.prediction == "42"  # the vote on the final population


def test_resume_continues_after_the_last_step(tmp_path: Path) -> None:
    path = tmp_path / "rounds.jsonl"
    model, _ = scripted()
    run(model, checkpoints=RoundCheckpoints(path), population=3, aggregate=2, steps=2)
    _, ledger = run(model, checkpoints=RoundCheckpoints(path), population=3, aggregate=2, steps=4)
    assert ledger.totals.calls == 3 * 2  # only steps 3 and 4


@pytest.mark.parametrize("options", [{"aggregate": 5, "population": 4}, {"steps": 0}, {"population": "x"}])
def test_bad_shapes_are_clear_errors(options: dict[str, object]) -> None:
    with pytest.raises(UserError):
        RSA(**options)  # type: ignore[arg-type]


def _long_model(prompts: list[str]) -> FakeModel:
    def answer(messages: Sequence[Message], params: SamplingParams) -> str:
        prompts.append(messages[-1].content)
        return "BEGIN " + "reasoning " * 1000 + "\\boxed{42}"  # 10,000 characters

    return FakeModel(answer)


def test_aggregation_sees_full_candidate_texts_unless_capped() -> None:
    full: list[str] = []
    run(_long_model(full), population=2, aggregate=2, steps=2)
    assert all(p.count("BEGIN ") == 2 for p in full if "Candidate solutions" in p)  # both whole, as the reference
    capped: list[str] = []
    run(_long_model(capped), population=2, aggregate=2, steps=2, excerpt_chars=4000)
    aggregations = [p for p in capped if "Candidate solutions" in p]
    assert aggregations and all("BEGIN " not in p for p in aggregations)
    recorded = RSA(excerpt_chars=4000).plan(ProblemSet("math"), RunBase()).method
    assert recorded["excerpt_chars"] == 4000  # a cap is recorded in config.json
