"""`testtime.rewards`: the label-free rewards as TRL reward functions. They group TRL's batch by prompt, vote
within each group, and score each completion; one test trains a real `GRPOTrainer` step with one on the
embedded model."""

from __future__ import annotations

import pytest

from testtime.core.errors import UserError
from testtime.rewards import format_reward, majority_reward, novelty_reward, reward_function

PROMPTS = ["What is 2 + 2?"] * 4 + ["What is 3 + 3?"] * 3
COMPLETIONS = ["\\boxed{4}", "so \\boxed{4.0}", "\\boxed{5}", "no answer", "\\boxed{6}", "\\boxed{7}", "\\boxed{6}"]


def test_majority_rewards_agreement_within_each_prompts_group() -> None:
    # 4 and 4.0 are one class (the grader's equivalence); a completion without an answer earns nothing
    assert majority_reward(completions=COMPLETIONS, prompts=PROMPTS) == [1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0]


def test_conversational_completions_and_prompts_as_trl_passes_them() -> None:
    prompts = [[{"role": "user", "content": p}] for p in PROMPTS]
    completions = [[{"role": "assistant", "content": c}] for c in COMPLETIONS]
    extra = {"completion_ids": [[1]] * 7, "trainer_state": None, "problem": ["x"] * 7}  # TRL's other keywords
    assert majority_reward(completions=completions, prompts=prompts, **extra) == majority_reward(
        completions=COMPLETIONS, prompts=PROMPTS
    )


def test_groups_are_consecutive_runs_not_every_equal_prompt() -> None:
    # the same question in two GRPO groups votes twice: a group never borrows another's samples
    prompts = ["q"] * 2 + ["r"] * 2 + ["q"] * 2
    completions = ["\\boxed{1}", "\\boxed{1}", "\\boxed{2}", "\\boxed{2}", "\\boxed{3}", "\\boxed{3}"]
    assert majority_reward(completions=completions, prompts=prompts) == [1.0] * 6


def test_format_and_novelty_follow_the_registered_rewards() -> None:
    assert format_reward(completions=COMPLETIONS, prompts=PROMPTS) == [1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0]
    novelty = novelty_reward(completions=COMPLETIONS, prompts=PROMPTS)
    assert all(0.5 <= r <= 1.0 for r, m in zip(novelty, [1, 1, 0, 0, 1, 0, 1], strict=True) if m)
    assert novelty[3] == -1.0 and -1.0 <= novelty[2] <= -0.5


def test_free_form_text_votes_by_the_medoid() -> None:
    reward = reward_function("majority", domain="text")
    replies = ["The sky is blue.", "the sky is blue", "Grass is green and tall."]
    assert reward(completions=replies, prompts=["Colour of the sky?"] * 3) == [1.0, 1.0, 0.0]


def test_free_form_text_votes_over_the_classes_a_judge_makes(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a judge, the text majority reward pays every paraphrase of the voted answer, not only copies of the
    medoid; without one, only identical replies agree (the fallback, said in the reward's evidence)."""
    import re

    from testtime import rewards
    from testtime.core.cache import CompletionCache
    from testtime.core.ledger import Ledger
    from testtime.core.rollout import RolloutEngine
    from testtime.models.fake import FakeModel

    def groups_by_city(messages, params) -> str:  # type: ignore[no-untyped-def]
        shown = re.findall(r'<response number="(\d+)">\n(.*?)\n</response>', messages[-1].content, re.S)
        paris = [n for n, text in shown if "Paris" in text]
        return "Group: " + ", ".join(paris) + "\nGroup: " + ", ".join(n for n, _ in shown if n not in paris)

    judge = RolloutEngine(FakeModel(groups_by_city), model_name="judge", cache=CompletionCache(None), ledger=Ledger())
    monkeypatch.setattr(rewards, "_judge_engine", lambda spec: judge)
    replies = ["Paris.", "The capital of France is Paris.", "The capital of France is Lyon.", "It is Paris."]
    judged = reward_function("majority", domain="text", judge="judge")
    assert judged(completions=replies, prompts=["Capital of France?"] * 4) == [1.0, 1.0, 0.0, 1.0]
    assert judged.__name__ == "testtime_majority_text_judged"
    alone = reward_function("majority", domain="text")(completions=replies, prompts=["Capital of France?"] * 4)
    assert sum(alone) == 1.0  # without a judge: only the medoid's exact copies, here itself


@pytest.mark.parametrize(
    ("name", "settings", "message"),
    [
        ("oracle", {}, "reads the labels"),
        ("self_certainty", {}, "token distribution"),
        ("majority", {"domain": "code"}, "code needs a sandbox"),
        ("truth", {}, "unknown ttrl reward 'truth'"),
    ],
)
def test_what_a_plain_trl_reward_cannot_honour_is_refused(name: str, settings: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        reward_function(name, **settings)


def test_a_batch_whose_prompts_do_not_match_its_completions_is_refused() -> None:
    with pytest.raises(ValueError, match="7 completions but 2 prompts"):
        majority_reward(completions=COMPLETIONS, prompts=PROMPTS[:2])


@pytest.mark.slow
def test_a_users_own_grpo_trainer_takes_a_step_on_the_majority_reward(tmp_path) -> None:
    pytest.importorskip("trl")
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from testtime.benchmarks.arith import FEW_SHOT
    from testtime.models.hf import embedded_model_dir

    seen: list[list[float]] = []

    def recorded(completions, **kwargs):  # the reward as TRL calls it, with what it returned
        rewards = majority_reward(completions=completions, **kwargs)
        seen.append(rewards)
        return rewards

    recorded.__name__ = "majority"
    shots = [{"role": m.role, "content": m.content} for m in FEW_SHOT]
    questions = ["What is 1 + 1?", "What is 2 + 3?"]
    dataset = Dataset.from_list([{"prompt": [*shots, {"role": "user", "content": q}]} for q in questions])
    config = GRPOConfig(
        output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, num_generations=4,
        max_completion_length=12, temperature=1.0, learning_rate=1e-5, use_cpu=True, bf16=False,
        report_to=[], logging_steps=1, save_strategy="no", seed=0, disable_tqdm=True,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=str(embedded_model_dir("smollm2-135m")), reward_funcs=recorded, args=config, train_dataset=dataset
    )
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()
    assert trainer.state.global_step == 1
    assert seen and all(r in (0.0, 1.0) for batch in seen for r in batch)
    logged = [entry for entry in trainer.state.log_history if "rewards/majority/mean" in entry]
    assert logged and logged[0]["rewards/majority/mean"] == pytest.approx(sum(seen[0]) / len(seen[0]))
    moved = any(not p.detach().equal(before[n]) for n, p in trainer.model.named_parameters())
    assert moved == any(0.0 < sum(b) < len(b) for b in seen)  # GRPO moves only where the group's rewards differ
