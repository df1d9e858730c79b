"""The TRT loop, per problem (problems run in parallel):

Round 0: the model writes K distinct strategies from the problem alone.
Round t = 1..T:
1. Generate K rollouts in parallel, each conditioned on the knowledge list and its own strategy (math: also
   the incumbent's answer, which a rollout may refute in an "[Error Report]").
2. Select without labels, the previous winner kept as a candidate (elitist); candidates in a seeded shuffle.
   Math: mutual exclusivity (a refuted incumbent answer is rejected with its reason; choose among the rest).
   Code: the execution selector (public + model-written tests in the sandbox). `--selector` swaps either.
3. Reflect: compare the others with the selected one → "don't" insights into the knowledge list, at most one
   deactivation, K new strategies.
Each finished round is checkpointed; a resumed run continues after the last finished round.
Model calls per problem: 1 + T·(K+1) on math, 1 + T·(K+2) on code (the extra one writes test inputs).
"""

from __future__ import annotations

import asyncio
import random
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from testtime.core.answers import cluster_answers, equivalent
from testtime.core.ledger import CallPurpose
from testtime.core.options import flag
from testtime.core.records import Candidate, Message, Problem
from testtime.core.results import Lesson, ProblemResult, Rejection, RoundCandidate, RoundRecord, Strategy
from testtime.core.selection import ExclusivityEvidence, ExecutionEvidence, Selection
from testtime.knowledge import KnowledgeList
from testtime.methods import METHODS, MethodContext, PerProblem, SelectorChoice, make_candidates
from testtime.methods.trt import prompts
from testtime.methods.trt.parsing import parse_reflection, parse_strategies
from testtime.methods.trt.refutation import final_text, refutation, summary, wrong_answer_list
from testtime.selectors import SelectionHistory

PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "paper": {},  # the paper's description: K strategy-guided rollouts, reflection, T=8
    # The released scripts: math is one chain of 64 rounds with the latest answer kept and only refuted
    # answers carried forward (no strategies, no reflection); code is T=8, K=2 with strategies (trt.md §2).
    "released": {
        "math": {"rounds": 64, "rollouts": 1, "exclusivity_rule": "latest", "strategies": False, "knowledge": False},
        "code": {"rounds": 8, "rollouts": 2},
    },
}


class TRTOptions(SelectorChoice):
    preset: Literal["paper", "released"] = flag(
        "paper", "paper (T=8, K=4 math / 2 code) | released (the released scripts: math T=64, K=1, latest)", "--preset"
    )
    rounds: int = flag(8, "rounds T", "--rounds", "-T", ge=1)
    rollouts: int | None = flag(None, "rollouts per round K (default: 4 math, 2 code)", "--rollouts", "-K", ge=1)
    exclusivity_rule: Literal["support", "latest"] = flag(
        "support", "math selection: support (the paper) | latest (the released code)", "--exclusivity-rule"
    )
    knowledge_cap: int = flag(5, "most active knowledge items", "--knowledge-cap", ge=1)
    strategies: bool = flag(True, "per-rollout strategies (ablation: --no-strategies)", "--strategies")
    knowledge: bool = flag(True, "the knowledge list (ablation: --no-knowledge)", "--knowledge")
    reference_summary: bool = flag(True, "math: show solvers the earlier answer's [Summary], as the reference does")
    reflect_chars: int = flag(
        4000, "reflection: characters of each attempt's final text (after its reasoning) shown", ge=100
    )


class TRTState(BaseModel):
    """Everything a round needs from the rounds before it; checkpointed after each round."""

    model_config = ConfigDict(extra="forbid")

    round: int = 0
    knowledge: KnowledgeList
    strategies: list[Strategy] = []
    incumbent: Candidate | None = None
    refutations: list[Rejection] = []  # math: every refutation, in order
    support: dict[str, int] = {}  # math: answer → rollouts that concluded it so far
    refuted: dict[str, int] = {}  # math: answer → rollouts that refuted it so far
    examples: dict[str, Candidate] = {}  # math: answer → the latest rollout that concluded it


@METHODS.register("trt", help="test-time recursive thinking: --rounds T, --rollouts K, knowledge, strategies")
class TRT(PerProblem):
    name = "trt"
    Options = TRTOptions
    options: TRTOptions
    default_selectors: ClassVar[dict[str, str]] = {"math": "exclusivity", "code": "execution"}
    flag_hints: ClassVar[dict[str, str]] = {"n": "it runs T rounds of K rollouts: use --rounds/-T and --rollouts/-K"}

    def prepare(self, domain: str, bench: str = "") -> None:
        given = self.options.model_fields_set  # what the user set wins over the preset
        preset = {k: v for k, v in PRESETS[self.options.preset].get(domain, {}).items() if k not in given}
        self.options = self.options.model_copy(update=preset)
        super().prepare(domain, bench)
        if (
            self.selector is not None
            and self.selector.name == "exclusivity"
            and "rule" not in self.options.selector_options
        ):
            self.selector = type(self.selector)(rule=self.options.exclusivity_rule)

    def planned_calls(self, domain: str, n: int | None) -> int | None:
        k = self.options.rollouts or (2 if domain == "code" else 4)
        reflect = self.options.knowledge or self.options.strategies
        return int(self.options.strategies) + self.options.rounds * (k + len(self._selector_calls()) + reflect)

    def call_kinds(self, domain: str) -> tuple[CallPurpose, ...]:
        kinds: list[CallPurpose] = ["strategies"] if self.options.strategies else []
        kinds.append("solve")
        if self.options.knowledge or self.options.strategies:
            kinds.append("reflect")
        return (*kinds, *self._selector_calls())

    def effective_n(self, n: int | None) -> int | None:
        return None  # T rounds of K rollouts (the method's options say how many)

    def planned_rounds(self) -> int | None:
        return self.options.rounds

    def _k(self, problem: Problem) -> int:
        return self.options.rollouts or (2 if problem.domain == "code" else 4)  # the paper's defaults per domain

    async def solve(self, problem: Problem, ctx: MethodContext) -> ProblemResult:
        k = self._k(problem)
        saved = ctx.checkpoints.last(problem.id)
        if saved is not None:
            state = TRTState.model_validate(saved["state"])
        else:
            state = TRTState(knowledge=KnowledgeList(max_items=self.options.knowledge_cap))
            if self.options.strategies:
                [completion] = await ctx.engine.sample(
                    [Message(role="user", content=prompts.STRATEGIES.format(k=k, problem=problem.statement))],
                    1,
                    ctx.params_for(0, 0, "strategies"),
                    problem_id=problem.id,
                    purpose="strategies",
                    step=0,
                )
                state.strategies, parsed = parse_strategies(completion.text, k)
                ctx.checkpoints.append(
                    problem.id, 0, {"state": state.model_dump(mode="json"), "strategies_parsed": parsed}
                )
        last_candidates: list[Candidate] = []
        last_selection: Selection | None = None
        for t in range(state.round + 1, self.options.rounds + 1):
            last_candidates, last_selection = await self._round(problem, ctx, state, t, k)
        rounds = tuple(
            RoundRecord.model_validate(e["record"]) for e in ctx.checkpoints.rounds(problem.id) if e["round"]
        )
        return ProblemResult(
            problem_id=problem.id,
            prediction=state.incumbent.answer if state.incumbent else None,
            candidates=last_candidates,
            selection=last_selection,
            rounds=rounds,
        )

    async def _round(
        self, problem: Problem, ctx: MethodContext, state: TRTState, t: int, k: int
    ) -> tuple[list[Candidate], Selection]:
        base = ctx.prompt(problem)
        used = [state.strategies[j].key_technique if j < len(state.strategies) else None for j in range(k)]
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
        selector = self.selector_for(problem.domain)
        if problem.domain == "math":
            selection = await self._select_math(problem, ctx, state, candidates, shuffled, t)
        else:
            previous = state.incumbent
            pool = ([previous] if previous else []) + shuffled  # elitist: last round's winner competes again
            selection = await selector.select(
                problem, pool, ctx.selection(step=t, params=ctx.params_for(t, 999, "tests"))
            )
            chosen = next((c for c in pool if c.index == selection.index), None)
            state.incumbent = chosen or previous
        reflection_parsed = None
        if self.options.knowledge or self.options.strategies:
            reflection_parsed = await self._reflect(problem, ctx, state, candidates, used, t, k, selection)
        state.round = t
        record = RoundRecord(
            round=t,
            order=tuple(order),
            selection=selection,
            selected_answer=state.incumbent.answer if state.incumbent else None,
            candidates=tuple(
                RoundCandidate(
                    index=c.index, answer=c.answer, error=c.error, tokens=c.completion_tokens, strategy=used[j]
                )
                for j, c in enumerate(candidates)
            ),
            knowledge=tuple(Lesson.model_validate(item.model_dump()) for item in state.knowledge.active()),
            knowledge_tokens=state.knowledge.tokens(),
            refutations=tuple(state.refutations),
            rejected=self._rejected(selection),
            strategies=tuple(state.strategies),
            reflection_parsed=reflection_parsed,
        )
        ctx.checkpoints.append(
            problem.id, t, {"state": state.model_dump(mode="json"), "record": record.model_dump(mode="json")}
        )
        return candidates, selection

    def _solver_messages(self, base: list[Message], problem: Problem, state: TRTState, j: int) -> list[Message]:
        sections = [base[-1].content]
        if self.options.knowledge and state.knowledge.active():
            sections.append(prompts.KNOWLEDGE.format(items=state.knowledge.render()))
        if self.options.strategies and j < len(state.strategies):
            sections.append(prompts.STRATEGY.format(**state.strategies[j].model_dump()))
        if problem.domain == "math":
            if state.refutations:
                sections.append(prompts.WRONG_ANSWERS.format(items=wrong_answer_list(state.refutations)))
            if state.incumbent is not None and state.incumbent.answer is not None:
                shown = summary(state.incumbent.text) if self.options.reference_summary else "(not shown)"
                sections.append(prompts.MATH_INCUMBENT.format(answer=state.incumbent.answer, summary=shown))
            sections.append(prompts.MATH_SUMMARY)
        return [*base[:-1], Message(role=base[-1].role, content="\n\n".join(sections))]

    @staticmethod
    def _rejected(selection: Selection) -> tuple[str, ...]:
        return selection.evidence.rejected if isinstance(selection.evidence, ExclusivityEvidence) else ()

    async def _select_math(
        self,
        problem: Problem,
        ctx: MethodContext,
        state: TRTState,
        candidates: list[Candidate],
        shuffled: list[Candidate],
        t: int,
    ) -> Selection:
        incumbent = state.incumbent.answer if state.incumbent else None
        known = [*state.support, *state.refuted]
        for c in candidates:  # a stated refutation is evidence against the answer it names (else the incumbent)
            found = refutation(c.text, c.answer, known, incumbent)
            if found is not None:
                target, reason = found
                key = next((k for k in state.refuted if equivalent(k, target)), target)
                state.refuted[key] = state.refuted.get(key, 0) + 1
                state.refutations.append(Rejection(answer=target, reason=reason, round=t))
        context = ctx.selection(step=t)
        context.history = SelectionHistory(
            support=dict(state.support), refuted=dict(state.refuted), incumbent=incumbent
        )
        selection = await self.selector_for(problem.domain).select(problem, shuffled, context)
        answers = list(state.support) + [c.answer for c in candidates]
        counts = list(state.support.values()) + [1] * len(candidates)
        state.support = {answers[cl[0]]: sum(counts[i] for i in cl) for cl in cluster_answers(answers)}
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

    async def _reflect(
        self,
        problem: Problem,
        ctx: MethodContext,
        state: TRTState,
        candidates: list[Candidate],
        used: list[str | None],
        t: int,
        k: int,
        selection: Selection,
    ) -> bool:
        selected = state.incumbent
        others = [c for c in candidates if selected is None or c.index != selected.index]

        strategy_of = {c.index: s for c, s in zip(candidates, used, strict=True)}
        limit = self.options.reflect_chars

        def show(c: Candidate) -> str:
            strategy = f"(strategy: {strategy_of[c.index]})\n" if strategy_of.get(c.index) else ""
            head = f"(answer: {c.answer})\n" if problem.domain == "math" else ""
            return f"{strategy}{head}{final_text(c.text)[-limit:]}"

        evidence = ""
        if isinstance(selection.evidence, ExecutionEvidence) and selection.evidence.report:
            lines = [
                f"candidate {row.index}: " + ", ".join(test.verdict for test in row.tests)
                for row in selection.evidence.report
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
            ctx.params_for(t, 1000, "reflect"),
            problem_id=problem.id,
            purpose="reflect",
            step=t,
        )
        reflection = parse_reflection(completion.text)
        if self.options.knowledge:
            if reflection.deactivate is not None:
                state.knowledge.deactivate(reflection.deactivate)
            for insight in reflection.insights:
                state.knowledge.add(insight, t)
        if self.options.strategies and reflection.strategies:
            state.strategies = (reflection.strategies * k)[:k]  # fewer than K: reuse them in turn
        return reflection.parsed
