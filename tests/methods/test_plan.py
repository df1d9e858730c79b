"""The plan record: a method's contract is small, its plan is frozen and complete, and the engine holds it to it."""

from __future__ import annotations

import ast
import asyncio
import dataclasses
import inspect
import textwrap
import warnings

import pytest

from tests.helpers import solve_with
from testtime.core.cache import CompletionCache
from testtime.core.declared import declared_calls
from testtime.core.errors import PlanError, UserError
from testtime.core.ledger import Ledger
from testtime.core.records import Message, Problem, SamplingParams
from testtime.core.results import ProblemResult
from testtime.core.rollout import RolloutEngine
from testtime.methods import METHODS, Method, MethodContext, PerProblem, SelectorChoice, load_methods, make_candidates
from testtime.methods.legacy import LEGACY_HOOKS
from testtime.methods.plan import Plan, ProblemSet, RunBase, settled
from testtime.models.fake import FakeModel
from testtime.selectors import SelectionContext

PROBLEM = Problem(id="p", domain="math", statement="What is 1 + 1?")
LOCAL = RunBase(model="hf:smollm2-135m")


def _public(cls: type) -> set[str]:
    return {name for name in vars(cls) if not name.startswith("_")} | {
        name for name in getattr(cls, "__annotations__", {}) if not name.startswith("_")
    }


def test_a_method_author_learns_at_most_six_members() -> None:
    """Method: its name (from the registration), Options, plan, learner; PerProblem adds solve."""
    assert _public(Method) <= {"name", "Options", "plan", "learner"}
    assert len(_public(Method) | _public(PerProblem)) <= 6
    assert _public(PerProblem) - _public(Method) == {"solve"}


def test_every_built_in_is_named_by_its_registration_and_declares_no_old_hook() -> None:
    load_methods()
    for name in METHODS.builtin_names():
        method = METHODS.get(name)
        assert method.name == name  # type: ignore[attr-defined]
        assert not any(hook in vars(klass) for klass in method.__mro__ for hook in LEGACY_HOOKS), name  # type: ignore[attr-defined]
        body = ast.parse(textwrap.dedent(inspect.getsource(method))).body[0]
        assert not [n for n in ast.walk(body) if isinstance(n, ast.Name) and n.id == "name"], name  # not written twice


@pytest.mark.parametrize("name", ["single", "majority", "rsa", "trt", "ttrl"])
@pytest.mark.parametrize("domain", ["math", "code"])
def test_every_built_in_plans_every_value_the_run_records(name: str, domain: str) -> None:
    """The plan holds all the manifest needs: sampling per kind (solve or TTRL's evaluations), its calls or
    samples, the selector and the method's record with the selector in it."""
    load_methods()
    plan = METHODS.create(name).plan(ProblemSet(domain, "b"), LOCAL)  # type: ignore[attr-defined]
    assert plan.sampling and all(isinstance(p, SamplingParams) for p in plan.sampling.values())
    assert plan.method["name"] == name and not plan.uses_labels and not plan.stream
    if name != "single":
        assert plan.selector is not None and plan.method["selector"] == plan.selector.describe()
        assert set(plan.selector.call_kinds()) <= plan.kinds  # a selector that asks the model: its calls planned
    assert (plan.calls is not None) or (plan.samples is not None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.samples = 99  # type: ignore[misc]


def test_the_n_flag_is_resolved_once_into_the_plan_and_refused_where_it_is_ignored() -> None:
    load_methods()
    majority = METHODS.create("majority")
    assert majority.plan(ProblemSet("math"), RunBase()).samples == 8  # type: ignore[attr-defined]
    assert majority.plan(ProblemSet("math"), RunBase(n=3)).calls == 3  # type: ignore[attr-defined]
    assert "n" in METHODS.create("trt").plan(ProblemSet("math"), RunBase()).ignores  # type: ignore[attr-defined]
    ttrl = METHODS.create("ttrl").plan(ProblemSet("math"), LOCAL)  # type: ignore[attr-defined]
    assert "n" not in ttrl.ignores and {"temperature", "top_p", "max_tokens"} <= set(ttrl.ignores)


def test_a_plan_refuses_what_the_method_cannot_run_with_in_one_line() -> None:
    load_methods()
    with pytest.raises(UserError, match="needs --model hf:"):
        METHODS.create("ttrl").plan(ProblemSet("math"), RunBase(model="openai:gpt"))  # type: ignore[attr-defined]
    with pytest.raises(UserError, match="add --stream"):
        METHODS.create("trt", memory="shared").plan(ProblemSet("math"), RunBase())  # type: ignore[attr-defined]
    plan = METHODS.create("trt", memory="shared").plan(ProblemSet("math"), RunBase(), stream=True)  # type: ignore[attr-defined]
    assert plan.stream


class _Sneaky(PerProblem):
    """Plans one `solve` call and also reflects: the kind of drift the plan exists to stop."""

    name = "sneaky"

    async def solve(self, problem: Problem, ctx: MethodContext) -> ProblemResult:
        messages = ctx.prompt(problem)
        completions = await ctx.engine.sample(messages, 1, ctx.sampled("solve"), problem_id=problem.id)
        await ctx.engine.sample(messages, 1, ctx.sampled("solve"), problem_id=problem.id, purpose="reflect")
        candidates = make_candidates(problem, completions)
        return ProblemResult(problem_id=problem.id, prediction=candidates[0].answer, candidates=candidates)


def test_the_engine_refuses_a_kind_of_call_the_plan_did_not_declare() -> None:
    """The undeclared call is refused before it is made: nothing paid, nothing in the ledger."""
    with pytest.raises(PlanError, match="'reflect' call, which the method's plan did not declare"):
        solve_with(_Sneaky(), FakeModel(), PROBLEM)
    plan = _Sneaky().plan(ProblemSet("math"), RunBase())
    with pytest.raises(PlanError, match="makes 'reflect' calls; its plan declares solve"):
        plan.sampled("reflect")


def test_the_declaration_holds_only_inside_the_method_that_made_it() -> None:
    """Another task (a served request of another method) and code outside any run are not bound by it."""
    engine = RolloutEngine(FakeModel(), model_name="fake:", cache=CompletionCache(None), ledger=Ledger())
    messages = [Message(role="user", content="hi")]

    async def call(kind: str) -> int:
        return len(await engine.sample(messages, 1, SamplingParams(), problem_id=kind, purpose=kind))  # type: ignore[arg-type]

    async def request(kinds: set[str], kind: str) -> int:  # a served request: a task of its own
        with declared_calls(dict.fromkeys(kinds, SamplingParams())):
            await asyncio.sleep(0)  # the two interleave
            return await call(kind)

    async def main() -> None:
        assert await asyncio.gather(request({"solve"}, "solve"), request({"consistency"}, "consistency")) == [1, 1]
        with declared_calls({"solve": SamplingParams()}):
            with pytest.raises(PlanError):
                await call("consistency")
        assert await call("consistency") == 1  # outside any method's run

    asyncio.run(main())
    assert engine.ledger.totals.calls == 3


def test_selection_context_is_a_new_value_per_use() -> None:
    ctx = SelectionContext(seed=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.seed = 2  # type: ignore[misc]
    assert dataclasses.replace(ctx, seed=2).seed == 2 and ctx.seed == 1


def test_an_old_contract_plugin_runs_for_one_release_with_a_warning_per_hook() -> None:
    """A plugin written before the plan: its hooks answer for its plan, each one a warning naming what
    replaces it, and its own __init__ passing `streaming` on still works."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        class OldVote(PerProblem):
            name = "old-vote"
            Options = SelectorChoice

            def __init__(self, streaming: bool = False, **options: object) -> None:
                super().__init__(streaming=streaming, **options)

            def planned_calls(self, domain: str, n: int | None) -> int | None:
                return n or 3

            def effective_n(self, n: int | None) -> int | None:
                return n or 3

            async def solve(self, problem: Problem, ctx: MethodContext) -> ProblemResult:
                n = ctx.plan.samples or 1
                completions = await ctx.engine.sample(ctx.prompt(problem), n, ctx.sampled("solve"), problem_id="p")
                candidates = make_candidates(problem, completions)
                selection = await self.selector_for(problem.domain).select(problem, candidates, ctx.selection())  # type: ignore[attr-defined]
                return ProblemResult(problem_id=problem.id, prediction=selection.answer, candidates=candidates)

        old = OldVote()
    said = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    assert any("`planned_calls`" in s and "Plan.calls" in s for s in said)
    assert any("`effective_n`" in s and "Plan.samples" in s for s in said)
    assert any("`streaming`" in s for s in said)
    plan = old.plan(ProblemSet("math"), RunBase())
    assert isinstance(plan, Plan) and plan.calls == 3 and plan.samples == 3 and plan.kinds == {"solve"}
    with warnings.catch_warnings(record=True) as solving:
        warnings.simplefilter("always")
        result, ledger = solve_with(old, FakeModel(), PROBLEM)
    assert ledger.totals.calls == 3 and result.prediction is not None
    told = [str(w.message) for w in solving if issubclass(w.category, FutureWarning)]
    assert [s for s in told if "ctx.engine.sample(...)" in s and "ctx.on(problem).sample('solve', n)" in s]
    assert [s for s in told if "ctx.selection() without the problem" in s]


HAND_BUILT = """
from testtime.api import METHODS, PerProblem, Plan, ProblemResult, make_candidates


@METHODS.register("hand-built", help="two samples, a plan built by hand")
class HandBuilt(PerProblem):
    def plan(self, problems, base, stream=False):
        return Plan(sampling={"solve": base.sampling()}, samples=2, calls=2)

    async def solve(self, problem, ctx):
        completions = await ctx.on(problem).sample("solve", ctx.plan.samples)
        candidates = make_candidates(problem, completions)
        return ProblemResult(problem_id=problem.id, prediction=candidates[0].answer, candidates=candidates)
"""


def test_a_plan_built_without_plan_of_runs_and_the_manifest_names_its_method(tmp_path, testtime_process) -> None:
    """A plugin's plan made with `Plan(...)` directly: the run records the method's name and options, plans its
    calls and makes them (a fresh process, as a user runs a plugin)."""
    import json

    plugin = tmp_path / "hand_built.py"
    plugin.write_text(HAND_BUILT)
    out = tmp_path / "run"
    done = testtime_process(
        "run", "--plugin", str(plugin), "--method", "hand-built", "--bench", "arith", "--limit", "2",
        "--model", "fake:echo", "--out", str(out), "--quiet",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "config.json").read_text())
    assert manifest["method"]["name"] == "hand-built"
    assert manifest["effective"]["n"] == 2 and manifest["effective"]["planned_calls_per_problem"] == 2
    assert len((out / "ledger.jsonl").read_text().splitlines()) == 4


def test_planning_never_changes_the_method() -> None:
    """A plan settles a preset for its problem set without writing it back: TRT's released preset planned for math
    (64 rounds of 1) and then for code plans code as a fresh method does (8 rounds of 2), and the learner runs with
    the options its own plan settled."""
    from testtime.methods.trt.method import TRT

    planned = TRT(preset="released")
    math = planned.plan(ProblemSet("math"), RunBase())
    code = planned.plan(ProblemSet("code"), RunBase())
    fresh = TRT(preset="released").plan(ProblemSet("code"), RunBase())
    assert (math.rounds, math.calls) == (64, 64)
    assert (code.rounds, code.calls) == (fresh.rounds, fresh.calls) == (8, 33)
    assert planned.options.rounds == 8 and planned.options.model_fields_set == {"preset"}
    assert settled(planned, math).options.rounds == 64 and settled(planned, code).options.rollouts == 2
    assert settled(planned, planned.plan(ProblemSet("code"), RunBase())).options == code.options
