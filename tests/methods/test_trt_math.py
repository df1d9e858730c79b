"""TRT's math selection on scripted sequences: the cases a side-by-side reading with the released code found,
the released code's own rule reproduced by `latest`, and invariants over random sequences.

A rollout is written as a short spec: "7" answers 7; "9!7" answers 9 with an error report against 7 (naming
it); "9!" answers 9 refuting whatever it was shown; "7?" answers 7 with "[Error Report] N/A"; "-" no answer.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence

import pytest

from tests.helpers import solve_with
from testtime.core.answers import equivalent
from testtime.core.records import Message, Problem, SamplingParams
from testtime.core.results import ProblemResult
from testtime.methods.trt.method import TRT
from testtime.models.fake import FakeModel

PROBLEM = Problem(id="p", domain="math", statement="What is the answer?")


def text(spec: str, shown: str | None) -> str:
    if spec == "-":
        return "I could not finish."
    if spec.endswith("?"):
        return f"[Error Report] N/A\n[Summary] agreed.\n\\boxed{{{spec[:-1]}}}"
    if "!" in spec:
        answer, target = spec.split("!")
        named = target or shown
        if named is None:  # nothing was shown and nothing named: there is nothing to refute
            return f"[Error Report] N/A\n\\boxed{{{answer}}}"
        return f"[Error Report] The answer cannot be {named} because it fails a check.\n\\boxed{{{answer}}}"
    return f"[Summary] worked it out.\n\\boxed{{{spec}}}"


def scripted(rounds: Sequence[Sequence[str]]) -> FakeModel:
    """Solver calls are answered in order: round t's K rollouts are calls t·K … t·K+K−1."""
    specs = iter([spec for round_ in rounds for spec in round_])

    def answer(messages: Sequence[Message], params: SamplingParams) -> str:
        prompt = messages[-1].content
        if "genuinely different approaches" in prompt or "You are improving a solver" in prompt:
            return json.dumps({"insights": []})
        shown = re.search(r"An earlier attempt concluded: (\S+)", prompt)
        return text(next(specs), shown.group(1) if shown else None)

    return FakeModel(answer)


def run(rounds: Sequence[Sequence[str]], **options: object) -> ProblemResult:
    k = len(rounds[0])
    method = TRT(rounds=len(rounds), rollouts=k, strategies=False, knowledge=False, **options)
    result, _ = solve_with(method, scripted(rounds), PROBLEM)
    return result


def selected(result: ProblemResult) -> list[str | None]:
    return [r.selected_answer for r in result.rounds]


@pytest.mark.parametrize("rule", ["support", "latest"])
def test_an_oscillating_answer_never_ends_as_no_answer(rule: str) -> None:
    # K=1: 7, then 9 refuting 7, then 7 refuting 9, then 7. The released code says 7 from round 3 on.
    result = run([["7"], ["9!"], ["7!"], ["7?"]], exclusivity_rule=rule)
    assert selected(result) == ["7", "9", "7", "7"] and result.prediction == "7"


def test_one_dissenter_does_not_veto_support() -> None:
    # Round 1: 7, 7, 7, 5. Round 2: one rollout answers 9 against 7, three agree with 7. 7 has 6 rollouts, 1 refutation.
    result = run([["7", "7", "7", "5"], ["9!", "7?", "7?", "7?"]])
    assert selected(result) == ["7", "7"]
    evidence = result.rounds[1].selection.evidence  # type: ignore[union-attr]
    assert evidence.support["7"] == 6 and evidence.refuted == {"7": 1} and evidence.rejected == ()  # type: ignore[union-attr]


def test_the_incumbent_is_the_chosen_answer_even_without_a_vote_this_round() -> None:
    # Round 1: 4, 4, 4, 7 -> 4. Round 2: 9 refutes 4, the rest give nothing: 4 keeps net 2 and stays chosen, so
    # its rollout from round 1 is the incumbent shown to round 3, and the prediction is 4.
    result = run([["4", "4", "4", "7"], ["9!", "-", "-", "-"], ["4?", "4?", "4?", "9"]])
    assert selected(result) == ["4", "4", "4"] and result.prediction == "4"
    assert result.rounds[1].selection is not None and result.rounds[1].selection.answer == "4"


def test_a_report_counts_against_the_answer_it_names() -> None:
    # Round 1: 5, 5, 7, 7. Round 2: one rollout writes "the answer cannot be 5" and answers 3; three give nothing.
    result = run([["5", "5", "7", "7"], ["3!5", "-", "-", "-"]])
    first, second = result.rounds
    assert [r.answer for r in second.refutations] == ["5"]  # not the incumbent, whatever it was
    assert second.selected_answer == first.selected_answer or second.selected_answer == "7"
    assert second.selected_answer not in second.rejected  # the record never contradicts itself


def test_a_refuted_answer_is_rejected_once_evidence_outweighs_support() -> None:
    # 5 once; then three rollouts refute it: net 1 - 3 < 0, rejected; it cannot come back on a single vote.
    result = run([["5", "-", "-"], ["4!5", "4!5", "6!5"], ["5", "-", "-"]])
    assert result.rounds[1].rejected == ("5",) and selected(result) == ["5", "4", "4"]


def released(specs: Sequence[str]) -> list[str | None]:
    """The released math script's rule (trt.md §3, K=1): the current answer is the latest round's; an error report
    with a different answer appends the previous one to the rejected list, which only the prompt sees."""
    current: str | None = None
    out = []
    for spec in specs:
        answer = spec.rstrip("?").split("!")[0]
        current = answer if answer != "-" else current
        out.append(current)
    return out


@pytest.mark.parametrize("seed", range(20))
def test_latest_reproduces_the_released_code_on_random_chains(seed: int) -> None:
    rng = random.Random(seed)
    specs = [rng.choice(["3", "5", "7", "3!", "5!", "7!", "5?", "-"]) for _ in range(6)]
    specs[0] = specs[0].rstrip("!?") if specs[0] != "-" else "3"
    result = run([[s] for s in specs], exclusivity_rule="latest")
    assert selected(result) == released(specs)


@pytest.mark.parametrize("seed", range(25))
def test_support_rule_invariants_on_random_rounds(seed: int) -> None:
    rng = random.Random(seed)
    alphabet = ["1", "2", "3", "1!", "2!", "3!", "2!1", "3!2", "1?", "-"]
    rounds = [[rng.choice(alphabet) for _ in range(3)] for _ in range(4)]
    result = run(rounds)
    answered = False
    for record in result.rounds:
        answered = answered or any(c.answer is not None for c in record.candidates)
        assert record.selected_answer not in record.rejected  # never a rejected answer
        assert (record.selected_answer is not None) == answered  # never nothing while some rollout answered
        assert record.selection is not None
        assert record.selection.answer is None or equivalent(record.selection.answer, record.selected_answer)
    assert result.prediction == result.rounds[-1].selected_answer
