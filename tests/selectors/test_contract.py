"""The selector contract, checked on every built-in selector (a plugin's, installed here, is its author's to
test): one Selection record with a class (or an abstention) per candidate, a chosen candidate in the selected
class, determinism, a round trip through JSON, options validated with one-line errors."""

from __future__ import annotations

import asyncio

import pytest

from testtime.core.errors import UserError
from testtime.core.records import Candidate, Problem, TestCase
from testtime.core.selection import Selection
from testtime.sandbox import Sandbox
from testtime.selectors import SELECTORS, SelectionContext, build_selector

MATH = Problem(id="m", domain="math", statement="What is 2 + 2?")
CODE = Problem(id="c", domain="code", statement="Print twice N.", public_tests=(TestCase(input="2", output="4"),))
TEXT = Problem(id="t", domain="text", statement="Where did the cat sit?")
DOUBLE, DOUBLE_TOO, SQUARE = "print(int(input()) * 2)", "n = int(input())\nprint(n + n)", "print(int(input()) ** 2)"
# Per selector: the domains it serves, and there a pool with a majority, a dissent and an abstention.
POOLS = {
    "majority": {"math": ["4", "5", "4", None, "04"], "code": [DOUBLE, SQUARE, DOUBLE, None]},
    "exclusivity": {"math": ["4", "5", "4", None, "04"]},
    "reflect": {"math": ["4", "5", "4", None, "04"]},  # no model in this context: the majority, said so
    "execution": {"code": [DOUBLE, SQUARE, DOUBLE_TOO, None, "def broken(:"]},
    "medoid": {"text": ["The cat sat on the mat.", "A dog barked.", "the cat sat on a mat", None, "cat sat on mat"]},
    "usc": {"text": ["The cat sat on the mat.", "A dog barked.", "the cat sat on a mat", None, "cat sat on mat"]},
}
PROBLEMS = {"math": MATH, "code": CODE, "text": TEXT}
CASES = [(name, domain) for name in SELECTORS.builtin_names() for domain in POOLS[name]]


def candidates(answers: list[str | None]) -> list[Candidate]:
    return [Candidate(index=10 + i, text="", answer=a) for i, a in enumerate(answers)]


@pytest.fixture(scope="module")
def context(open_sandbox_or_skip: Sandbox) -> SelectionContext:
    return SelectionContext(seed=3, sandbox=open_sandbox_or_skip)


def select(name: str, domain: str, answers: list[str | None], ctx: SelectionContext) -> Selection:
    return asyncio.run(build_selector(name).select(PROBLEMS[domain], candidates(answers), ctx))


def test_every_selector_has_a_pool_here() -> None:
    assert sorted(POOLS) == SELECTORS.builtin_names()  # a new selector must join these contract tests


@pytest.mark.parametrize(("name", "domain"), CASES)
def test_one_score_per_candidate_in_order(name: str, domain: str, context: SelectionContext) -> None:
    answers = POOLS[name][domain]
    selection = select(name, domain, answers, context)
    assert selection.selector == name
    assert [s.index for s in selection.scores] == [c.index for c in candidates(answers)]


@pytest.mark.parametrize(("name", "domain"), CASES)
def test_the_choice_is_a_candidate_of_the_selected_class(name: str, domain: str, context: SelectionContext) -> None:
    pool = candidates(POOLS[name][domain])
    selection = select(name, domain, POOLS[name][domain], context)
    chosen = next(c for c in pool if c.index == selection.index)
    assert selection.answer == chosen.answer
    assert selection.cluster is not None and selection.in_selected_class(chosen.index)
    assert 0.0 < selection.majority_ratio <= 1.0
    members = [s.index for s in selection.scores if s.cluster == selection.cluster]
    assert len(members) >= 2  # the majority of each pool here agrees


@pytest.mark.parametrize(("name", "domain"), CASES)
def test_no_answer_abstains(name: str, domain: str, context: SelectionContext) -> None:
    pool = candidates(POOLS[name][domain])
    selection = select(name, domain, POOLS[name][domain], context)
    for candidate in pool:
        if candidate.answer is None:
            assert selection.class_of(candidate.index) is None and not selection.in_selected_class(candidate.index)


@pytest.mark.parametrize(("name", "domain"), CASES)
def test_all_abstain_chooses_nothing(name: str, domain: str, context: SelectionContext) -> None:
    selection = select(name, domain, [None, None, None], context)
    assert selection.index is None and selection.answer is None and selection.cluster is None
    assert all(s.cluster is None for s in selection.scores)


@pytest.mark.parametrize(("name", "domain"), CASES)
def test_selection_is_deterministic_and_survives_json(name: str, domain: str, context: SelectionContext) -> None:
    first = select(name, domain, POOLS[name][domain], context)
    again = select(name, domain, POOLS[name][domain], context)
    assert first.model_copy(update={"sandbox_seconds": 0}) == again.model_copy(update={"sandbox_seconds": 0})
    assert Selection.model_validate_json(first.model_dump_json()) == first


@pytest.mark.parametrize("name", SELECTORS.builtin_names())
def test_an_unknown_option_is_one_clear_line(name: str) -> None:
    with pytest.raises(UserError, match=f"selector {name} does not take option 'colour'"):
        build_selector(name, {"colour": "blue"})


@pytest.mark.parametrize("name", SELECTORS.builtin_names())
def test_describe_records_the_options(name: str) -> None:
    described = build_selector(name).describe()
    assert described["name"] == name and set(described) - {"name"} == set(SELECTORS.get(name).Options.model_fields)  # type: ignore[attr-defined]


def test_a_bad_option_value_names_the_field() -> None:
    with pytest.raises(UserError, match="selector majority option tie_policy"):
        build_selector("majority", {"tie_policy": "coin"})
