"""TRT's math round, in its two loops: what a solver is shown, and how the round's refutations and selection
update the state. `paper` (default): refutations weighed against support by the exclusivity selector, solvers
shown the rejected and the disputed answers apart. `released` (`--preset released`): the released Qwen script's
loop where it is unambiguous (`refutation.py`, trt.md §3)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from testtime.core.answers import cluster_answers, equivalent
from testtime.core.records import Candidate, Message, Problem
from testtime.core.results import Rejection
from testtime.core.selection import ExclusivityEvidence, Selection
from testtime.methods.trt import prompts
from testtime.methods.trt.refutation import (
    evidence_lists,
    refutation,
    released_answer,
    released_drop,
    released_list,
    released_summary,
    summary,
)
from testtime.selectors import SelectionContext, SelectionHistory, Selector

if TYPE_CHECKING:
    from testtime.methods.trt.method import TRTOptions, TRTState


def solver_sections(options: TRTOptions, state: TRTState, problem: Problem, sections: list[str]) -> list[str]:
    """The math parts of a solver's prompt, after the problem (and, in the paper's loop, lessons and strategy)."""
    incumbent = state.incumbent
    if options.math_loop == "released":
        if incumbent is None:
            return [problem.statement + prompts.RELEASED_FIRST]
        reference = released_summary(incumbent.text)
        listed = released_list(state.refutations)
        return [problem.statement + prompts.RELEASED_REFINE.format(reference=reference, wrong=listed)]
    answer = incumbent.answer if incumbent else None
    wrong, disputed = evidence_lists(state.refutations, state.rejected, answer, options.reason_chars)
    if wrong:
        sections.append(prompts.WRONG_ANSWERS.format(items=wrong))
    if disputed:
        sections.append(prompts.DISPUTED.format(items=disputed))
    if incumbent is not None and answer is not None:
        shown = summary(incumbent.text, options.summary_chars) if options.reference_summary else "(not shown)"
        sections.append(prompts.MATH_INCUMBENT.format(answer=answer, summary=shown))
    sections.append(prompts.MATH_SUMMARY)
    return sections


def solver_messages(options: TRTOptions, state: TRTState, base: list[Message], problem: Problem, sections: list[str]):  # type: ignore[no-untyped-def]
    """The solver's conversation: the benchmark's (few-shot) prefix, then the round's user message."""
    content = "\n\n".join(solver_sections(options, state, problem, sections))
    return [*base[:-1], Message(role=base[-1].role, content=content)]


def with_released_answers(candidates: list[Candidate]) -> list[Candidate]:
    """The released loop reads a round's answer its own way (the last boxed integer, else the last integer)."""
    return [c if c.error else c.model_copy(update={"answer": released_answer(c.text)}) for c in candidates]


async def select(
    options: TRTOptions,
    state: TRTState,
    problem: Problem,
    selector: Selector,
    candidates: list[Candidate],
    shuffled: list[Candidate],
    context: SelectionContext,
    t: int,
) -> Selection:
    """Record this round's refutations, select, and move the support, the rejected answers and the incumbent to
    the new state."""
    incumbent = state.incumbent.answer if state.incumbent else None
    known = [*state.support, *state.refuted]
    for c in candidates:  # a refutation is evidence against the answer it names (else the incumbent)
        if options.math_loop == "released":
            found = released_drop(c.text, incumbent)
        else:
            found = refutation(c.text, c.answer, known, incumbent)
        if found is not None:
            target, reason = found
            key = next((k for k in state.refuted if equivalent(k, target)), target)
            state.refuted[key] = state.refuted.get(key, 0) + 1
            state.refutations.append(Rejection(answer=target, reason=reason, round=t))
    history = SelectionHistory(support=dict(state.support), refuted=dict(state.refuted), incumbent=incumbent)
    selection = await selector.select(problem, shuffled, replace(context, history=history))
    answers = list(state.support) + [c.answer for c in candidates]
    counts = list(state.support.values()) + [1] * len(candidates)
    state.support = {answers[cl[0]]: sum(counts[i] for i in cl) for cl in cluster_answers(answers)}
    if isinstance(selection.evidence, ExclusivityEvidence):
        state.rejected = list(selection.evidence.rejected)
    for c in candidates:  # the latest rollout behind each answer represents it
        if c.answer is not None:
            key = next((k for k in state.examples if equivalent(k, c.answer)), c.answer)
            state.examples[key] = c
    # The incumbent is the chosen answer, represented by this round's rollout or the latest that concluded it.
    chosen = next((c for c in candidates if c.index == selection.index), None)
    if chosen is None and selection.answer is not None:
        chosen = next((c for k, c in state.examples.items() if equivalent(k, selection.answer)), state.incumbent)
    state.incumbent = chosen
    return selection
