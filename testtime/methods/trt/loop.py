"""The TRT loop, per problem (problems run in parallel):

Round 0: the model writes K distinct strategies from the problem alone.
Round t = 1..T:
1. Generate K rollouts in parallel, each conditioned on the knowledge list and its own strategy (math: also
   the incumbent's answer, which a rollout may refute in an "[Error Report]").
2. Select without labels, the previous winner kept as a candidate (elitist); candidates in a seeded shuffle.
   Math: mutual exclusivity (a refuted incumbent answer is rejected with its reason; choose among the rest).
   Code: the execution selector (public + model-written tests in the sandbox).
3. Reflect: compare the others with the selected one → "don't" insights into the knowledge list, at most one
   deactivation, K new strategies.
Each finished round is checkpointed; a resumed run continues after the last finished round.
Model calls per problem: 1 + T·(K+1) on math, 1 + T·(K+2) on code (the extra one writes test inputs).
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from pydantic import BaseModel, ConfigDict

from testtime.core.answers import cluster_answers, equivalent
from testtime.core.errors import UserError
from testtime.core.records import Candidate, Message, Problem, Selection
from testtime.knowledge import KnowledgeList
from testtime.methods import METHODS, Method, MethodContext, ProblemResult, make_candidates, option_flag
from testtime.methods.trt import prompts
from testtime.methods.trt.parsing import Strategy, error_report, parse_reflection, parse_strategies
from testtime.selectors.exclusivity import ExclusivitySelector
from testtime.selectors.execution import ExecutionSelector

EXCERPT = 1200


class TRTState(BaseModel):
    """Everything a round needs from the rounds before it; checkpointed after each round."""

    model_config = ConfigDict(extra="forbid")

    round: int = 0
    knowledge: KnowledgeList
    strategies: list[Strategy] = []
    incumbent: Candidate | None = None
    rejected: list[dict[str, Any]] = []  # math: {"answer", "reason", "round"}
    support: dict[str, int] = {}  # math: answer → rollouts behind it so far


@METHODS.register("trt", help="test-time recursive thinking: --rounds T, --rollouts K, knowledge, strategies")
class TRT(Method):
    name = "trt"

    def __init__(
        self,
        rounds: int | str = 8,
        rollouts: int | str | None = None,
        exclusivity_rule: str = "support",
        knowledge_cap: int | str | None = None,
        strategies: bool | str = True,
        knowledge: bool | str = True,
        test_inputs: int | str = 10,
    ) -> None:
        try:
            self.rounds, self.test_inputs = int(rounds), int(test_inputs)
            self.rollouts = int(rollouts) if rollouts not in (None, "") else None
            self.knowledge_cap = int(knowledge_cap) if knowledge_cap not in (None, "") else None
        except (TypeError, ValueError):
            raise UserError("trt: rounds, rollouts, knowledge_cap and test_inputs must be integers") from None
        if self.rounds < 1 or (self.rollouts is not None and self.rollouts < 1):
            raise UserError("trt: rounds and rollouts must be at least 1")
        self.exclusivity = ExclusivitySelector(exclusivity_rule)
        self.use_strategies, self.use_knowledge = option_flag(strategies), option_flag(knowledge)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "rounds": self.rounds,
            "rollouts": self.rollouts,
            "exclusivity_rule": self.exclusivity.rule,
            "knowledge_cap": self.knowledge_cap,
            "strategies": self.use_strategies,
            "knowledge": self.use_knowledge,
            "test_inputs": self.test_inputs,
        }

    def _k(self, problem: Problem) -> int:
        return self.rollouts or (2 if problem.domain == "code" else 4)  # the paper's defaults per domain

    async def solve(self, problem: Problem, ctx: MethodContext) -> ProblemResult:
        k = self._k(problem)
        saved = ctx.checkpoints.last(problem.id)
        if saved is not None:
            state = TRTState.model_validate(saved["state"])
        else:
            cap = self.knowledge_cap or 5
            state = TRTState(knowledge=KnowledgeList(max_items=cap))
            if self.use_strategies:
                [completion] = await ctx.engine.sample(
                    [Message(role="user", content=prompts.STRATEGIES.format(k=k, problem=problem.statement))],
                    1,
                    ctx.params_for(0, 0),
                    problem_id=problem.id,
                    purpose="strategies",
                    step=0,
                )
                state.strategies, parsed = parse_strategies(completion.text, k)
                ctx.checkpoints.append(
                    problem.id,
                    0,
                    {"state": state.model_dump(mode="json"), "record": {"round": 0, "strategies_parsed": parsed}},
                )
        last_candidates: list[Candidate] = []
        last_selection: Selection | None = None
        for t in range(state.round + 1, self.rounds + 1):
            last_candidates, last_selection = await self._round(problem, ctx, state, t, k)
        records = [e["record"] for e in ctx.checkpoints.rounds(problem.id) if e["round"] > 0]
        prediction = state.incumbent.answer if state.incumbent else None
        return ProblemResult(
            problem_id=problem.id,
            prediction=prediction,
            candidates=last_candidates,
            selection=last_selection,
            details={"rounds": records},
        )

    async def _round(
        self, problem: Problem, ctx: MethodContext, state: TRTState, t: int, k: int
    ) -> tuple[list[Candidate], Selection]:
        base = ctx.prompt(problem)
        rollouts = await asyncio.gather(
            *(
                ctx.engine.sample(
                    self._solver_messages(base, problem, state, j),
                    1,
                    ctx.params_for(t, j),
                    problem_id=problem.id,
                    purpose="solve",
                    step=t,
                )
                for j in range(k)
            )
        )
        candidates = [
            c.model_copy(update={"index": (t - 1) * k + j})
            for j, c in enumerate(make_candidates(problem, [r[0] for r in rollouts]))
        ]
        order = list(range(k))
        random.Random(f"{ctx.seed}-{problem.id}-{t}").shuffle(order)
        shuffled = [candidates[i] for i in order]
        previous = state.incumbent
        if problem.domain == "math":
            selection = self._select_math(problem, state, candidates, shuffled, t)
        else:
            pool = ([previous] if previous else []) + shuffled  # elitist: last round's winner competes again
            context = {
                "seed": ctx.seed,
                "engine": ctx.engine,
                "params": ctx.params_for(t, 999),
                "sandbox": ctx.sandbox,
                "step": t,
            }
            selection = await ExecutionSelector(self.test_inputs).aselect(problem, pool, context)
            chosen = next((c for c in pool if c.index == selection.index), None)
            state.incumbent = chosen or previous
        reflection_parsed = None
        if self.use_knowledge or self.use_strategies:
            reflection_parsed = await self._reflect(problem, ctx, state, candidates, selection, t, k)
        state.round = t
        record = {
            "round": t,
            "order": order,
            "selection": selection.model_dump(mode="json"),
            "selected_answer": state.incumbent.answer if state.incumbent else None,
            "candidates": [
                {
                    "index": c.index,
                    "answer": c.answer,
                    "error": c.error,
                    "tokens": c.completion_tokens,
                    "strategy": state.strategies[j].key_technique if j < len(state.strategies) else None,
                }
                for j, c in enumerate(candidates)
            ],
            "knowledge": [item.model_dump() for item in state.knowledge.active()],
            "knowledge_tokens": state.knowledge.tokens(),
            "rejected": list(state.rejected),
            "strategies": [s.model_dump() for s in state.strategies],
            "reflection_parsed": reflection_parsed,
        }
        ctx.checkpoints.append(problem.id, t, {"state": state.model_dump(mode="json"), "record": record})
        return candidates, selection

    def _solver_messages(self, base: list[Message], problem: Problem, state: TRTState, j: int) -> list[Message]:
        sections = [base[-1].content]
        if self.use_knowledge and state.knowledge.active():
            sections.append(prompts.KNOWLEDGE.format(items=state.knowledge.render()))
        if self.use_strategies and j < len(state.strategies):
            sections.append(prompts.STRATEGY.format(**state.strategies[j].model_dump()))
        if problem.domain == "math" and state.incumbent is not None and state.incumbent.answer is not None:
            sections.append(prompts.MATH_INCUMBENT.format(answer=state.incumbent.answer))
        return [*base[:-1], Message(role=base[-1].role, content="\n\n".join(sections))]

    def _select_math(
        self, problem: Problem, state: TRTState, candidates: list[Candidate], shuffled: list[Candidate], t: int
    ) -> Selection:
        incumbent = state.incumbent.answer if state.incumbent else None
        for c in candidates:  # a stated refutation of the incumbent's answer rejects it
            reason = error_report(c.text) if incumbent and c.answer and not equivalent(c.answer, incumbent) else None
            if reason and not any(equivalent(incumbent, r["answer"]) for r in state.rejected):
                state.rejected.append({"answer": incumbent, "reason": reason, "round": t})
                state.knowledge.add(
                    f"The answer is not {incumbent}: {reason}", t, source="refutation", rejected_answer=incumbent
                )
        selection = self.exclusivity.select(
            problem,
            shuffled,
            {"rejected": [r["answer"] for r in state.rejected], "support": state.support, "incumbent": incumbent},
        )
        answers = list(state.support) + [c.answer for c in candidates]
        counts = list(state.support.values()) + [1] * len(candidates)
        state.support = {answers[cl[0]]: sum(counts[i] for i in cl) for cl in cluster_answers(answers)}
        if selection.answer is None:
            state.incumbent = None
        elif not (state.incumbent and equivalent(selection.answer, state.incumbent.answer)):
            chosen = next((c for c in candidates if c.index == selection.index), None)
            state.incumbent = chosen or state.incumbent
        return selection

    async def _reflect(
        self,
        problem: Problem,
        ctx: MethodContext,
        state: TRTState,
        candidates: list[Candidate],
        selection: Selection,
        t: int,
        k: int,
    ) -> bool:
        selected = state.incumbent
        others = [c for c in candidates if selected is None or c.index != selected.index]

        def show(c: Candidate) -> str:
            return f"(answer: {c.answer})\n{c.text[-EXCERPT:]}" if problem.domain == "math" else c.text[-EXCERPT:]

        evidence = ""
        if problem.domain == "code" and "report" in selection.evidence:
            lines = [
                f"candidate {row['index']}: " + ", ".join(test["verdict"] for test in row["tests"])
                for row in selection.evidence["report"]
            ]
            evidence = prompts.CODE_EVIDENCE.format(report="\n".join(lines))
        message = prompts.REFLECT.format(
            problem=problem.statement,
            selected=show(selected) if selected else "(none)",
            others="\n\n".join(show(c) for c in others) or "(none)",
            evidence=evidence,
            knowledge=state.knowledge.render() or "(none yet)",
            k=k,
        )
        [completion] = await ctx.engine.sample(
            [Message(role="user", content=message)],
            1,
            ctx.params_for(t, 1000),
            problem_id=problem.id,
            purpose="reflect",
            step=t,
        )
        reflection = parse_reflection(completion.text)
        if self.use_knowledge:
            if reflection.deactivate is not None:
                state.knowledge.deactivate(reflection.deactivate)
            for insight in reflection.insights:
                state.knowledge.add(insight, t)
        if self.use_strategies and reflection.strategies:
            state.strategies = (reflection.strategies * k)[:k]  # fewer than K: reuse them in turn
        return reflection.parsed
