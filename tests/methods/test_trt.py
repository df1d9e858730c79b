"""TRT driven through known paths by a scripted model that recognises each prompt it is sent."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

from tests.helpers import solve_with
from testtime.core.checkpoint import RoundCheckpoints
from testtime.core.ledger import Ledger
from testtime.core.records import Message, Problem, SamplingParams
from testtime.core.results import ProblemResult
from testtime.methods.trt.method import TRT
from testtime.models.fake import FakeModel

PROBLEM = Problem(id="two-plus-two", domain="math", statement="What is 2 + 2?")
STRATEGIES = json.dumps(
    [
        {"key_technique": "count", "what_to_try": "count on fingers"},
        {"key_technique": "add", "what_to_try": "add directly"},
    ]
)
REFLECTION = json.dumps(
    {
        "insights": ["Do not confuse 2 + 2 with 2 + 3"],
        "deactivate": None,
        "strategies": [{"key_technique": "recount", "what_to_try": "count twice"}],
    }
)

Solver = Callable[[str, int], str]  # (solver prompt, rollout number within the run) -> completion


def scripted(solver: Solver, strategies: str = STRATEGIES, reflection: str = REFLECTION) -> FakeModel:
    rollouts = iter(range(10**6))

    def answer(messages: Sequence[Message], params: SamplingParams) -> str:
        prompt = messages[-1].content
        if "genuinely different approaches" in prompt:
            return strategies
        if "You are improving a solver" in prompt:
            return reflection
        return solver(prompt, next(rollouts))

    return FakeModel(answer)


def run(
    model: FakeModel, problem: Problem = PROBLEM, checkpoints: RoundCheckpoints | None = None, **options: object
) -> tuple[ProblemResult, Ledger]:
    return solve_with(TRT(**options), model, problem, checkpoints)  # type: ignore[arg-type]


def earlier_answer(prompt: str) -> str | None:
    match = re.search(r"An earlier attempt concluded: (\S+)", prompt)
    return match.group(1) if match else None


def test_a_wrong_answer_is_refuted_then_corrected() -> None:
    seen: list[str] = []

    def solver(prompt: str, _: int) -> str:
        seen.append(prompt)
        if earlier_answer(prompt) == "5":
            return "2 + 2 = 4.\n[Error Report] The answer cannot be 5 because 2 + 2 = 4, not 5.\n\\boxed{4}"
        return "Two and two make five.\n[Summary] I added two and two. \\boxed{5}"

    result, ledger = run(scripted(solver), rounds=3, rollouts=2)
    rounds = result.rounds
    assert [r.selected_answer for r in rounds] == ["5", "4", "4"]
    assert rounds[1].refutations[0].answer == "5" and "cannot be 5" in rounds[1].refutations[0].reason
    assert result.prediction == "4"
    # Round 2's solvers saw round 1's summary; round 3's saw 5 (refuted twice, reached twice: net 0, not
    # rejected) as disputed, with its reason once, and nothing on the wrong-answer list.
    assert "I added two and two" in seen[2]
    disputed = seen[4].split("### Disputed answers")[1].split("###")[0]
    assert disputed.count("Answer 5: The answer cannot be 5") == 1 and "### Wrong answers" not in seen[4]
    assert not any("not 5" in item.text for item in rounds[1].knowledge)  # refutations are not knowledge items
    assert ledger.totals.calls == 1 + 3 * (2 + 1)  # strategies + T·(K rollouts + reflection)


def test_latest_rule_follows_the_newest_round() -> None:
    answers = iter(["\\boxed{4}", "\\boxed{4}", "\\boxed{6}", "\\boxed{6}"])
    result, _ = run(
        scripted(lambda prompt, n: next(answers)),
        rounds=2,
        rollouts=2,
        exclusivity_rule="latest",
        knowledge=False,
        strategies=False,
    )
    assert [r.selected_answer for r in result.rounds] == ["4", "6"]


def test_knowledge_is_pruned_at_its_cap() -> None:
    counter = iter(range(100))

    def reflection_each_time() -> str:
        return json.dumps({"insights": [f"Do not repeat mistake number {next(counter)} from round notes"]})

    model = scripted(lambda prompt, n: "\\boxed{4}")
    original = model.script

    def with_fresh_reflections(messages: Sequence[Message], params: SamplingParams) -> str:
        if "You are improving a solver" in messages[-1].content:
            return reflection_each_time()
        return original(messages, params)

    model.script = with_fresh_reflections
    result, _ = run(model, rounds=4, rollouts=2, knowledge_cap=2)
    sizes = [len(r.knowledge) for r in result.rounds]
    assert sizes == [1, 2, 2, 2]
    assert [item.text[-18:] for item in result.rounds[-1].knowledge] == [
        "2 from round notes",
        "3 from round notes",
    ]


def test_malformed_strategies_fall_back_gracefully() -> None:
    seen: list[str] = []

    def solver(prompt: str, _: int) -> str:
        seen.append(prompt)
        return "\\boxed{4}"

    result, _ = run(
        scripted(solver, strategies="Sure! {not json at all", reflection="no json either"), rounds=2, rollouts=2
    )
    assert result.prediction == "4"
    assert all("### Suggested strategy" in prompt for prompt in seen)  # fallback strategies were used
    assert [r.reflection_parsed for r in result.rounds] == [False, False]


def test_ablations_remove_their_calls_and_prompt_sections() -> None:
    seen: list[str] = []

    def solver(prompt: str, _: int) -> str:
        seen.append(prompt)
        return "\\boxed{4}"

    _, ledger = run(scripted(solver), rounds=2, rollouts=2, strategies=False, knowledge=False)
    assert ledger.totals.calls == 2 * 2  # no strategy call, no reflection
    assert not any("Suggested strategy" in p or "Lessons" in p for p in seen)


def test_resume_continues_after_the_last_finished_round(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "rounds.jsonl"
    model = scripted(lambda prompt, n: "\\boxed{4}")
    run(model, checkpoints=RoundCheckpoints(path), rounds=2, rollouts=2)
    lines_after_two = len(path.read_text().splitlines())
    calls_before = model.calls
    result, ledger = run(model, checkpoints=RoundCheckpoints(path), rounds=4, rollouts=2)
    assert [r.round for r in result.rounds] == [1, 2, 3, 4]
    assert ledger.totals.calls == 2 * (2 + 1)  # only rounds 3 and 4 were paid for
    assert model.calls - calls_before == 6 and len(path.read_text().splitlines()) == lines_after_two + 2


def test_each_rollout_is_recorded_with_the_strategy_its_prompt_showed() -> None:
    """Reflection replaces the strategies after a round: the record must keep the ones the round used."""
    shown: dict[int, str] = {}
    rounds = iter(range(10**6))

    def solver(prompt: str, n: int) -> str:
        shown[n] = re.search(r"Key technique: (.+)", prompt).group(1)  # type: ignore[union-attr]
        return "\\boxed{4}"

    def reflection() -> str:
        t = next(rounds) + 2
        return json.dumps(
            {"insights": [], "strategies": [{"key_technique": f"plan-{t}-{j}", "what_to_try": "x"} for j in range(2)]}
        )

    model = scripted(solver)
    original = model.script
    model.script = lambda m, p: reflection() if "You are improving a solver" in m[-1].content else original(m, p)
    result, _ = run(model, rounds=3, rollouts=2)
    recorded = [c.strategy for r in result.rounds for c in r.candidates]
    assert recorded == [shown[n] for n in range(6)]
    assert recorded[2:] == ["plan-2-0", "plan-2-1", "plan-3-0", "plan-3-1"]  # the strategies differ per round


def test_trt_on_code_ranks_by_unit_tests_unless_told_otherwise() -> None:
    """The seed's self-verification by default: unit tests with expected outputs from the specification,
    candidates ranked by tests passed; behaviour agreement stays a named alternative (`rank=agreement`)."""
    from testtime.methods.plan import ProblemSet, RunBase
    from testtime.methods.trt.method import TRT

    base = RunBase(model="fake:", n=None, seed=0)
    for preset in ("paper", "released"):
        plan = TRT(preset=preset).plan(ProblemSet("code"), base)
        assert plan.selector is not None and plan.selector.options.rank == "tests_passed"  # type: ignore[attr-defined]
        assert plan.method["selector"]["rank"] == "tests_passed"  # the manifest says which
    chosen = TRT(selector_options={"rank": "agreement"}).plan(ProblemSet("code"), base)
    assert chosen.selector is not None and chosen.selector.options.rank == "agreement"  # type: ignore[attr-defined]


def test_a_trt_code_run_recorded_before_rank_resumes_by_agreement() -> None:
    from testtime.run.migrate import manifest_to_current

    old = {"schema_version": 2, "run": {"method": "trt", "seeds": "per-problem", "method_options": {"rounds": "2"}},
           "method": {"name": "trt", "selector": {"name": "execution", "test_inputs": 10}}}  # fmt: skip
    migrated = manifest_to_current(old)
    assert migrated["run"]["method_options"] == {
        "rounds": "2",
        "strategy_prompts": "generic",
        "selector_options": {"rank": "agreement"},
    }
    recorded = {"name": "execution", "test_inputs": 10, "rank": "tests_passed"}
    new = {**old, "method": {"name": "trt", "selector": recorded, "strategy_prompts": "domain"}}
    assert manifest_to_current(new)["run"]["method_options"] == {"rounds": "2"}


def _boxed(prompt: str, n: int) -> str:
    return "It is \\boxed{4}."


def test_knowledge_health_counts_what_parsed_and_what_entered() -> None:
    """0 of 32 strategy lists and 2 of 64 reflections once parsed on the embedded model, no lesson entered, and
    the run was reported as TRT: every TRT summary now counts them, and warns when the list stayed empty."""
    from testtime.core.results import ResultRecord
    from testtime.evaluation.scoring import knowledge_health, summarize, unlabelled

    healthy, _ = run(scripted(_boxed), rounds=2, rollouts=2)
    broken, _ = run(scripted(_boxed, strategies="no list", reflection="no json"), rounds=2, rollouts=2)
    pairs = (("ok", healthy), ("no", broken))
    records = {name: [ResultRecord.of(result, unlabelled("math", result))] for name, result in pairs}
    ok, no = knowledge_health(records["ok"]), knowledge_health(records["no"])
    assert ok is not None and no is not None
    assert (ok.strategy_lists, ok.strategy_lists_parsed, ok.reflections, ok.reflections_parsed) == (1, 1, 2, 2)
    assert ok.lessons_entered == 1 and ok.problems_with_lessons == 1  # the same insight twice enters once
    assert (no.strategy_lists_parsed, no.reflections_parsed, no.lessons_entered) == (0, 0, 0)
    warned = summarize(records["no"], Ledger().totals, method="trt").warnings
    assert any("knowledge list stayed empty" in w and "0 of 2 reflections parsed" in w for w in warned)
    assert not any("stayed empty" in w for w in summarize(records["ok"], Ledger().totals, method="trt").warnings)
    no_list, _ = run(scripted(_boxed), rounds=2, rollouts=2, knowledge=False)
    health = knowledge_health([ResultRecord.of(no_list, unlabelled("math", no_list))])
    assert health is not None and health.lessons_entered is None  # no list: nothing to warn about


def test_strategies_are_asked_for_in_the_domains_own_paradigms() -> None:
    seen: list[str] = []

    def answer(messages: Sequence[Message], params: SamplingParams) -> str:
        seen.append(messages[-1].content)
        return STRATEGIES if "genuinely different approaches" in messages[-1].content else "It is \\boxed{4}."

    run(FakeModel(answer), rounds=1, rollouts=2, knowledge=False)
    code = Problem(id="sum", domain="code", statement="Print the sum.", public_tests=())
    run(FakeModel(answer), code, rounds=1, rollouts=2, knowledge=False)
    run(FakeModel(answer), rounds=1, rollouts=2, knowledge=False, strategy_prompts="generic")
    asked = [p for p in seen if "genuinely different approaches" in p]
    assert "proof and problem-solving techniques" in asked[0] and "algorithmic paradigms" in asked[1]
    assert "paradigms" not in asked[2] and "techniques:" not in asked[2]  # the generic prompt, as runs before
