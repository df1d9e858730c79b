"""The miniature reports on problems its preset was never tuned on: the two sets are disjoint, the run records
what its preset was tuned on, and the report sets the trained model beside the base's greedy answer."""

from __future__ import annotations

from testtime.benchmarks.arith import Arith
from testtime.experiments.ttrl_miniature import miniature_settings
from testtime.methods.plan import ProblemSet, RunBase
from testtime.methods.ttrl.recipe import TUNED_ON


def _statements(options: dict[str, object]) -> set[str]:
    problems, _ = Arith(**options).load()
    return {p.statement for p in problems}


def test_the_miniature_reports_on_problems_the_cpu_preset_was_not_tuned_on() -> None:
    tuned = TUNED_ON["cpu"]
    settings = miniature_settings()
    assert settings.bench == tuned["bench"] == "arith"
    reported, tuned_on = _statements(settings.bench_options), _statements(tuned["options"])
    assert len(reported) == len(tuned_on) == 32
    assert not reported & tuned_on  # not one problem of the report was seen while the preset was chosen
    assert {p.id for p in Arith(**settings.bench_options).load()[0]} == {f"arith-d2-{i}" for i in range(32)}


def test_every_ttrl_run_records_what_its_preset_was_tuned_on() -> None:
    from testtime.methods import METHODS, load_methods

    load_methods()
    for preset in ("cpu", "paper"):
        planned = METHODS.create("ttrl", preset=preset).plan(
            ProblemSet("math", "arith"), RunBase(model="hf:smollm2-135m")
        )
        described = planned.method
        assert described["tuned_on"] == TUNED_ON[preset]


def test_a_ttrl_runs_same_rollouts_baseline_is_its_answers_samples_not_its_tokens_k() -> None:
    """TTRL's `same_budget_majority_n` is the k its tokens buy; `report`'s same-rollouts column takes the samples
    its answer is drawn from (it used the tokens' k, so both columns matched tokens)."""
    from types import SimpleNamespace

    from testtime.experiments.report import _rollouts

    manifest = SimpleNamespace(manifest=SimpleNamespace(run=SimpleNamespace(n=None)))
    ttrl = SimpleNamespace(summary=SimpleNamespace(ttrl=object(), n=8, same_budget_majority_n=40), loaded=manifest)
    trt = SimpleNamespace(summary=SimpleNamespace(ttrl=None, n=None, same_budget_majority_n=4), loaded=manifest)
    assert _rollouts(ttrl) == 8 and _rollouts(trt) == 4  # type: ignore[arg-type]
