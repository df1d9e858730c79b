"""The TRT loop, per problem (problems run in parallel):

Round 0: the model writes K distinct strategies from the problem alone.
Round t = 1..T:
1. Generate K rollouts in parallel, each conditioned on the knowledge list and its own strategy (math: also
   the incumbent's answer, which a rollout may refute in an "[Error Report]").
2. Select without labels, the previous winner kept as a candidate (elitist); candidates in a seeded shuffle.
   Math: mutual exclusivity (a refuted incumbent answer is rejected with its reason; choose among the rest).
   Code: the execution selector (public + model-written tests in the sandbox). Free-form text: the medoid of
   the replies (`--selector usc` asks the model). `--selector` swaps any of them.
3. Reflect: compare the others with the selected one → "don't" insights into the knowledge list, at most one
   deactivation, K new strategies.
Each finished round is checkpointed; a resumed run continues after the last finished round.
Model calls per problem: 1 + T·(K+1) on math, 1 + T·(K+2) on code (the extra one writes test inputs).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from testtime.core.errors import UserError
from testtime.core.options import flag
from testtime.core.records import Candidate, Message, Problem, SamplingParams
from testtime.core.results import Lesson, ProblemResult, Rejection, RoundCandidate, RoundRecord, Strategy
from testtime.core.rollout import gather_landed
from testtime.core.selection import ExclusivityEvidence, ExecutionEvidence, Selection
from testtime.knowledge import KnowledgeList
from testtime.methods import METHODS, MethodContext, PerProblem, SelectorChoice, make_candidates
from testtime.methods.learner import Learner
from testtime.methods.plan import Plan, ProblemSet, RunBase, settled
from testtime.methods.trt import math_round, prompts
from testtime.methods.trt.code_evidence import execution_report
from testtime.methods.trt.parsing import parse_reflection, parse_strategies
from testtime.methods.trt.refutation import final_text

PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "paper": {},  # the paper's description: K strategy-guided rollouts, reflection, T=8
    # The released scripts: math is one chain of 64 rounds with the latest answer kept and only refuted
    # answers carried forward (no strategies, no reflection); code is T=8, K=2 with strategies (trt.md §2).
    # On math the released loop itself (math_round.py): its answer rule, its drop rule, its prompts' structure,
    # nothing capped. On code it sets what the released scripts set (T=8, K=2, strategies); the released LLM
    # judge is not reproduced: selection stays execution-based.
    "released": {
        "math": {
            "rounds": 64,
            "rollouts": 1,
            "exclusivity_rule": "latest",
            "strategies": False,
            "knowledge": False,
            "math_loop": "released",
            "summary_chars": None,
            "reason_chars": None,
        },
        "code": {"rounds": 8, "rollouts": 2},
    },
}


class TRTOptions(SelectorChoice):
    preset: Literal["paper", "released"] = flag(
        "paper", "paper (T=8, K=4 math / 2 code) | released (the released scripts: math T=64, K=1, latest)", "--preset"
    )
    rounds: int = flag(8, "rounds T", "--rounds", "-T", ge=1)
    rollouts: int | None = flag(
        None,
        "rollouts per round K (default: 4 math, this project's; 2 code, the released scripts')",
        "--rollouts",
        "-K",
        ge=1,
    )
    exclusivity_rule: Literal["support", "latest"] = flag(
        "support",
        "math selection: support (this project's: support minus refutations; the paper frames agreement, states no "
        "rule) | latest (the released code)",
        "--exclusivity-rule",
    )
    knowledge_cap: int = flag(5, "most active knowledge items", "--knowledge-cap", ge=1)
    strategies: bool = flag(True, "per-rollout strategies (ablation: --no-strategies)", "--strategies")
    strategy_prompts: Literal["domain", "generic"] = flag(
        "domain",
        "domain (the paper: strategies drawn from the domain's paradigms, algorithmic for code, proof techniques "
        "for math) | generic (one prompt for every domain, as runs before this)",
    )
    knowledge: bool = flag(True, "the knowledge list (ablation: --no-knowledge)", "--knowledge")
    reference_summary: bool = flag(True, "math: show solvers the earlier answer's [Summary], as the reference does")
    reflect_chars: int = flag(
        4000, "reflection: characters of each attempt's final text (after its reasoning) shown", ge=100
    )
    lessons_per_round: int = flag(1, "most lessons a reflection adds per round (the reference keeps one)", ge=1)
    math_loop: Literal["paper", "released"] = flag(
        "paper", "math: paper (refutations weighed, rejected and disputed shown apart) | released (the released code)"
    )
    memory: Literal["problem", "shared"] = flag(
        "problem",
        "problem (the paper: knowledge lives and dies with one problem) | shared (with --stream: general lessons "
        "carried into later problems' prompts, with their provenance)",
    )
    memory_cap: int = flag(8, "memory=shared: most active lessons carried across problems", ge=1)
    summary_chars: int | None = flag(1500, "math: the last characters of the earlier summary shown (none: all)", ge=1)
    reason_chars: int | None = flag(500, "math: characters of each refutation's reason shown (none: all)", ge=1)
    default_selectors: ClassVar[Mapping[str, str]] = {"math": "exclusivity", "code": "execution", "text": "medoid"}


# trt.md §3-4: T=0.6 for both released math models; max new tokens 0.9 × the context (118k-236k) on math and
# 200,000 on code. 32,768 here: reasoning-sized, and accepted by most APIs (many refuse more; raise --max-tokens
# where the model allows it).
DEFAULT_SAMPLING = SamplingParams(temperature=0.6, max_tokens=32_768)
# Seed slots of the calls that are not rollouts (a rollout's slot is its place in the round), fixed: a resumed
# run's cache keys depend on them.
STRATEGIES_SLOT, TESTS_SLOT, REFLECT_SLOT, MEMORY_SLOT = 0, 999, 1000, 2000  # MEMORY: memory=shared's rewrite


def rollouts(options: TRTOptions, domain: str) -> int:
    """K: the option, else the default for the domain: 4 on math (this project's; the paper names none), 2 on code
    (the released scripts')."""
    return options.rollouts or (2 if domain == "code" else 4)


class TRTState(BaseModel):
    """Everything a round needs from the rounds before it; checkpointed after each round."""

    model_config = ConfigDict(extra="forbid")

    round: int = 0
    knowledge: KnowledgeList
    strategies: list[Strategy] = []
    incumbent: Candidate | None = None
    refutations: list[Rejection] = []  # math: every refutation, in order
    rejected: list[str] = []  # math: the answers the last selection rejected
    support: dict[str, int] = {}  # math: answer → rollouts that concluded it so far
    refuted: dict[str, int] = {}  # math: answer → rollouts that refuted it so far
    examples: dict[str, Candidate] = {}  # math: answer → the latest rollout that concluded it
    memory: str = ""  # memory=shared: the lessons from earlier problems this problem's prompts carry
    strategies_parsed: bool | None = None  # whether the model's own strategy list was usable (None: not asked)


@METHODS.register("trt", help="test-time recursive thinking: --rounds T, --rollouts K, knowledge, strategies")
class TRT(PerProblem):
    Options = TRTOptions
    options: TRTOptions

    def plan(self, problems: ProblemSet, base: RunBase, stream: bool = False) -> Plan:
        given = self.options.model_fields_set  # what the user set wins over the preset
        preset = {k: v for k, v in PRESETS[self.options.preset].get(problems.domain, {}).items() if k not in given}
        o = self.options.model_copy(update=preset)
        if o.memory == "shared" and not stream:
            raise UserError("trt memory=shared carries lessons from problem to problem on a stream: add --stream")
        if o.memory == "shared" and not o.knowledge:
            raise UserError("trt memory=shared shares the knowledge list's lessons: it needs --knowledge")
        selector = o.build(problems.domain)
        if selector.name == "exclusivity" and "rule" not in o.selector_options:
            selector = type(selector)(rule=o.exclusivity_rule)
        if selector.name == "execution" and "rank" not in o.selector_options:
            # the paper's self-verification: unit tests from the specification, candidates ranked by tests passed
            selector = type(selector)(**{**o.selector_options, "rank": "tests_passed"})
        reflects = o.knowledge or o.strategies
        kinds: list[str] = [
            *(["strategies"] if o.strategies else []),
            "solve",
            *(["reflect"] if reflects else []),
        ]
        params = base.sampling(DEFAULT_SAMPLING)
        k = rollouts(o, problems.domain)
        return Plan.of(
            self,
            dict.fromkeys(kinds, params),
            params,
            stream=stream,
            selector=selector,
            # memory=shared: one more reflection after the rounds generalises the problem's lessons
            calls=int(o.strategies) + o.rounds * (k + selector.planned_calls() + reflects) + (o.memory == "shared"),
            rounds=o.rounds,  # T rounds of K rollouts: no fixed number of samples an answer is drawn from
            ignores={"n": "it runs T rounds of K rollouts: use --rounds/-T and --rollouts/-K"},
            options=o,
        )

    def learner(self, ctx: MethodContext) -> Learner:
        if ctx.plan.method.get("memory") == "shared":
            from testtime.methods.trt.memory import SharedMemoryLearner

            return SharedMemoryLearner(settled(self, ctx.plan), ctx)
        return super().learner(ctx)

    async def solve(self, problem: Problem, ctx: MethodContext, memory: str = "") -> ProblemResult:
        """`memory`: lessons from earlier problems of a stream (memory=shared), fixed for this problem."""
        k = rollouts(self.options, problem.domain)
        saved = ctx.checkpoints.last(problem.id)
        if saved is not None:
            state = TRTState.model_validate(saved["state"])
        else:
            state = TRTState(knowledge=KnowledgeList(max_items=self.options.knowledge_cap), memory=memory)
            if self.options.strategies:
                asked = [Message(role="user", content=self._strategies_prompt(problem, k))]
                [completion] = await ctx.on(problem).sample("strategies", 1, asked, step=0, slot=STRATEGIES_SLOT)
                state.strategies, parsed = parse_strategies(completion.text, k)
                state.strategies_parsed = parsed
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
        calls = ctx.on(problem)
        base = list(calls.prompt)
        used = [state.strategies[j].key_technique if j < len(state.strategies) else None for j in range(k)]
        rollouts = await gather_landed(
            *(
                calls.sample("solve", 1, self._solver_messages(base, problem, state, j), step=t, slot=j)
                for j in range(k)
            )
        )
        candidates = [
            c.model_copy(update={"index": (t - 1) * k + j})
            for j, c in enumerate(make_candidates(problem, [r[0] for r in rollouts]))
        ]
        if problem.domain == "math" and self.options.math_loop == "released":
            candidates = math_round.with_released_answers(candidates)
        order = list(range(k))
        calls.rng(t).shuffle(order)
        shuffled = [candidates[i] for i in order]
        selector = ctx.plan.selector
        assert selector is not None, "trt's plan names its selector"
        if problem.domain == "math":
            selection = await math_round.select(
                self.options, state, problem, selector, candidates, shuffled, ctx.selection(problem, step=t), t
            )
        else:
            previous = state.incumbent
            pool = ([previous] if previous else []) + shuffled  # elitist: last round's winner competes again
            # code's execution: this round's test inputs, seeded apart from its rollouts
            selection = await selector.select(problem, pool, ctx.selection(problem, step=t, slot=TESTS_SLOT))
            chosen = next((c for c in pool if c.index == selection.index), None)
            state.incumbent = chosen or previous
        reflection_parsed, lessons_added = None, None
        if self.options.knowledge or self.options.strategies:
            reflection_parsed, lessons_added = await self._reflect(
                problem, ctx, state, candidates, used, t, k, selection
            )
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
            strategies_parsed=state.strategies_parsed if t == 1 else None,
            lessons_added=lessons_added,
        )
        ctx.checkpoints.append(
            problem.id, t, {"state": state.model_dump(mode="json"), "record": record.model_dump(mode="json")}
        )
        return candidates, selection

    def _strategies_prompt(self, problem: Problem, k: int) -> str:
        kinds = prompts.STRATEGY_KINDS.get(problem.domain)
        if self.options.strategy_prompts == "generic" or kinds is None:
            return prompts.STRATEGIES.format(k=k, problem=problem.statement)
        return prompts.DOMAIN_STRATEGIES.format(k=k, kinds=kinds, problem=problem.statement)

    def _solver_messages(self, base: list[Message], problem: Problem, state: TRTState, j: int) -> list[Message]:
        sections = [base[-1].content]
        if state.memory:
            sections.append(prompts.MEMORY.format(items=state.memory))
        if self.options.knowledge and state.knowledge.active():
            sections.append(prompts.KNOWLEDGE.format(items=state.knowledge.render()))
        if self.options.strategies and j < len(state.strategies):
            sections.append(prompts.STRATEGY.format(**state.strategies[j].model_dump()))
        if problem.domain == "math":
            return math_round.solver_messages(self.options, state, base, problem, sections)
        return [*base[:-1], Message(role=base[-1].role, content="\n\n".join(sections))]

    @staticmethod
    def _rejected(selection: Selection) -> tuple[str, ...]:
        return selection.evidence.rejected if isinstance(selection.evidence, ExclusivityEvidence) else ()

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
    ) -> tuple[bool, int | None]:
        """Whether the reflection parsed, and how many lessons entered the knowledge list (None: no list)."""
        selected = state.incumbent
        others = [c for c in candidates if selected is None or c.index != selected.index]

        strategy_of = {c.index: s for c, s in zip(candidates, used, strict=True)}
        limit = self.options.reflect_chars

        def show(c: Candidate) -> str:
            strategy = f"(strategy: {strategy_of[c.index]})\n" if strategy_of.get(c.index) else ""
            head = f"(answer: {c.answer})\n" if problem.domain == "math" else ""
            return f"[attempt {c.index}]\n{strategy}{head}{final_text(c.text)[-limit:]}"

        evidence = ""
        if isinstance(selection.evidence, ExecutionEvidence) and selection.evidence.report:
            report = execution_report(selection.evidence, selected.index if selected else None)
            evidence = prompts.CODE_EVIDENCE.format(report=report)
        message = prompts.REFLECT.format(
            problem=problem.statement,
            selected=show(selected) if selected else "(none)",
            others="\n\n".join(show(c) for c in others) or "(none)",
            evidence=evidence,
            knowledge=state.knowledge.render() or "(none yet)",
            k=k,
        )
        asked = [Message(role="user", content=message)]
        [completion] = await ctx.on(problem).sample("reflect", 1, asked, step=t, slot=REFLECT_SLOT)
        reflection = parse_reflection(completion.text)
        added = None
        if self.options.knowledge:
            if reflection.deactivate is not None:
                state.knowledge.deactivate(reflection.deactivate)
            entered = [
                state.knowledge.add(insight, t) for insight in reflection.insights[: self.options.lessons_per_round]
            ]
            added = sum(item is not None for item in entered)
        if self.options.strategies and reflection.strategies:
            state.strategies = (reflection.strategies * k)[:k]  # fewer than K: reuse them in turn
        return reflection.parsed, added
