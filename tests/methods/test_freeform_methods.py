"""Every served method answers a free-form problem: replies without any answer to extract are chosen among by a
free-form selector (medoid by default, usc on request), recorded in the result, never "no candidate"."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest

from tests.helpers import solve_with
from testtime.core.errors import UserError
from testtime.core.records import Message, Problem, SamplingParams
from testtime.methods import METHODS, PerProblem, load_methods
from testtime.methods.plan import ProblemSet, RunBase
from testtime.models.fake import FakeModel

load_methods()
PROBLEM = Problem(id="haiku", domain="text", statement="Write a haiku about autumn rain.")
HAIKUS = [
    "Autumn rain falls soft\non the quiet maple leaves\nthe garden listens",
    "Grey autumn rain falls\non the quiet maple leaves\nthe garden sleeps now",
    "Invoices are due",  # an outlier
]
SMALL = {
    "single": {},
    "majority": {},
    "trt": {"rounds": 2, "rollouts": 3},
    "rsa": {"population": 3, "aggregate": 2, "steps": 2},
}


def poet() -> FakeModel:
    """Prose for every call (strategies and reflections too), the haikus in turn."""
    turn = itertools.count()

    def script(messages: Sequence[Message], params: SamplingParams) -> str:
        if "most consistent response" in messages[-1].content:
            return "The most consistent response is Response 1."
        return HAIKUS[next(turn) % len(HAIKUS)]

    return FakeModel(script)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_method_answers_a_free_form_problem_with_a_reply(name: str) -> None:
    method = METHODS.get(name)(**SMALL[name])
    assert isinstance(method, PerProblem)
    result, _ = solve_with(method, poet(), PROBLEM)
    if name == "single":
        assert result.prediction == HAIKUS[0] and result.selection is None
        return
    assert result.prediction in HAIKUS[:2]  # the outlier is never the reply most like the others
    assert result.selection is not None and result.selection.selector == "medoid"


def test_usc_is_chosen_by_an_option_recorded_and_its_call_planned() -> None:
    method = METHODS.get("majority")(selector="usc")
    plan = method.plan(ProblemSet("text"), RunBase(n=3))
    assert plan.method["selector"]["name"] == "usc"
    assert plan.kinds == {"solve", "consistency"} and plan.calls == 3 + 2
    result, ledger = solve_with(method, poet(), PROBLEM)
    assert result.selection is not None and result.selection.selector == "usc"
    assert ledger.totals.calls == 8 + 2  # the default 8 samples, the judgement and the grouping
    words = METHODS.get("majority")(selector="usc", selector_options={"agreement": "words"})
    assert words.plan(ProblemSet("text"), RunBase(n=3)).calls == 3 + 1


@pytest.mark.parametrize("selector", ["majority", "execution", "exclusivity"])
def test_a_selector_of_extracted_answers_is_refused_on_free_form_text(selector: str) -> None:
    method = METHODS.get("majority")(selector=selector)
    with pytest.raises(UserError, match="cannot choose among text answers"):
        method.plan(ProblemSet("text"), RunBase())
