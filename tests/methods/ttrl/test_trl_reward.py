"""TTRL's TRL reward function on grouped completions, its step log, and the label-free monitor."""

from types import SimpleNamespace

import pytest

from testtime.core.ledger import Ledger, read_entries
from testtime.core.records import Problem
from testtime.core.results import TTRLStep, read_steps
from testtime.methods.ttrl.monitor import CollapseAlarm, LabelHistory
from testtime.methods.ttrl.recipe import TTRLSettings
from testtime.methods.ttrl.trl_reward import VoteReward, append_step, resume_steps
from testtime.selectors import SelectionContext, build_selector

PROBLEMS = {pid: Problem(id=pid, domain="math", statement=f"question {pid}") for pid in ("p1", "p2")}


def _reward(tmp_path, **overrides):
    settings = TTRLSettings.from_options({"preset": "cpu", "n_vote": 4, "n_train": 4, **overrides})
    ledger = Ledger(tmp_path / "ledger.jsonl")
    selector = build_selector("majority")
    reward = VoteReward(settings, PROBLEMS, selector, lambda _: SelectionContext(), ledger=ledger, model_name="hf:t")
    return reward, reward.buffer


def _batch(groups):
    """TRL's layout: each prompt's completions consecutive, conversational messages, dataset columns aligned."""
    prompts, completions, ids, pids = [], [], [], []
    for pid, texts in groups:
        for text in texts:
            prompts.append([{"role": "user", "content": f"question {pid}"}])
            completions.append([{"role": "assistant", "content": text}])
            ids.append(list(range(len(text.split()))))
            pids.append(pid)
    return {"prompts": prompts, "completions": completions, "completion_ids": ids, "problem_id": pids}


def test_each_group_votes_on_its_own_and_rewards_agreement(tmp_path):
    reward, log = _reward(tmp_path)
    batch = _batch(
        [
            ("p1", ["\\boxed{3}", "\\boxed{3}", "\\boxed{4}", "no answer here"]),
            ("p2", ["\\boxed{9}", "\\boxed{8}", "\\boxed{8}", "\\boxed{8}"]),
        ]
    )
    rewards = reward(**batch, trainer_state=SimpleNamespace(global_step=0), log_metric=print)
    assert rewards == [1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    assert [v.label for v in log.votes] == ["3", "8"]
    assert log.votes[0].answers == ("3", "3", "4", None)
    assert log.stats["majority_ratio"] == pytest.approx((0.5 + 0.75) / 2)
    assert log.stats["no_answer_rate"] == pytest.approx(0.125)
    assert reward.ledger.totals.calls == 8  # every training rollout is a ledger line


def test_label_flips_are_tracked_across_steps(tmp_path):
    reward, log = _reward(tmp_path)
    reward(**_batch([("p1", ["\\boxed{3}"] * 3 + ["\\boxed{4}"])]), trainer_state=None)
    assert log.votes[-1].flipped is None  # first visit
    reward(**_batch([("p1", ["\\boxed{4}"] * 3 + ["\\boxed{3}"])]), trainer_state=None)
    assert log.votes[-1].flipped is True
    assert log.stats["label_flip_rate"] == 1.0


def test_extra_votes_decide_the_label_but_are_not_rewarded(tmp_path):
    reward, log = _reward(tmp_path, n_vote=6, n_train=2)
    # the two trained samples split 1-1; four extra votes for "5" settle it
    reward.extra_votes = lambda prompts, k: [[("\\boxed{5}", 3)] * k for _ in prompts]
    rewards = reward(**_batch([("p1", ["\\boxed{5}", "\\boxed{6}"])]), trainer_state=None)
    assert rewards == [1.0, 0.0]
    assert log.votes[0].label == "5" and log.votes[0].answers == ("5", "6")
    assert reward.ledger.totals.calls == 6  # 2 rollouts and 4 extra votes


def test_a_group_that_mixes_prompts_is_refused(tmp_path):
    reward, _ = _reward(tmp_path, n_vote=2, n_train=2)
    batch = _batch([("p1", ["\\boxed{1}"]), ("p2", ["\\boxed{1}"])])
    with pytest.raises(RuntimeError, match="mixes prompts"):
        reward(**batch, trainer_state=None)


def test_resume_reloads_the_label_history(tmp_path):
    reward, log = _reward(tmp_path)
    reward(**_batch([("p1", ["\\boxed{3}"] * 4)]), trainer_state=None)
    append_step(tmp_path / "steps.jsonl", TTRLStep(step=3, votes=tuple(log.votes)))
    history = LabelHistory()
    assert resume_steps(tmp_path / "steps.jsonl", history) == 3
    assert history.flipped("p1", log.votes[0].label_key) is False


def test_label_history_reports_first_visit_as_unknown():
    history = LabelHistory()
    assert history.flipped("a", "1") is None
    assert history.flipped("a", "1") is False
    assert history.flipped("a", None) is True


def _steps(n, ratio, entropy, length):
    return [{"majority_ratio": ratio, "entropy": entropy, "mean_length": length}] * n


def test_collapse_alarm_needs_all_three_signals():
    healthy_learning = CollapseAlarm(window=3)
    for s in _steps(3, 0.6, 0.5, 100) + _steps(3, 0.99, 0.01, 100):  # certain, but not terse
        assert healthy_learning.update(s) is None
    collapsing = CollapseAlarm(window=3)
    fired = [collapsing.update(s) for s in _steps(3, 0.6, 0.5, 100) + _steps(3, 0.99, 0.01, 20)]
    assert fired[:-1] == [None] * 5 and fired[-1] and "collapse" in fired[-1]


def test_label_churn_fires_the_alarm_only_when_it_persists():
    occasional = CollapseAlarm(window=3)  # a flip now and then is a label being corrected, not churn
    assert [occasional.update({"label_flip_rate": f}) for f in (0.8, 0.0, 0.0, 0.8, 0.0, 0.0)] == [None] * 6
    churning = CollapseAlarm(window=3)
    fired = [churning.update({"label_flip_rate": 0.7}) for _ in range(3)]
    assert fired[:2] == [None, None] and fired[2] and "label churn" in fired[2] and "70%" in fired[2]


def test_first_visits_carry_no_flip_rate(tmp_path):
    reward, log = _reward(tmp_path)
    reward(**_batch([("p1", ["\\boxed{3}"] * 4)]), trainer_state=None)
    assert "label_flip_rate" not in log.stats  # no revisit yet: not a rate of 0


def test_collapse_alarm_ignores_steps_without_the_signals():
    alarm = CollapseAlarm(window=1)
    assert alarm.update({"majority_ratio": 1.0}) is None
    assert alarm.history == []


def test_a_skipped_vote_survives_the_step_log(tmp_path):
    reward, log = _reward(tmp_path)
    reward(**_batch([("p1", ["no answer"] * 4)]), trainer_state=None)
    assert log.votes[0].label is None and log.votes[0].skipped == "all_abstain"
    append_step(tmp_path / "steps.jsonl", TTRLStep(step=1, votes=tuple(log.votes)))
    [record] = read_steps(tmp_path / "steps.jsonl")
    written = [v.model_dump() for v in record.votes]
    assert written == [v.model_dump() for v in log.votes]  # written without its empty fields, read back whole


def test_extra_votes_drawn_with_the_rollouts_arrive_per_row(tmp_path):
    """shared_rollouts hands each row its prompt's extra votes: they decide the label, and are ledger lines."""
    reward, log = _reward(tmp_path, n_vote=5, n_train=2)
    batch = _batch([("p1", ["\\boxed{3}", "\\boxed{4}"]), ("p2", ["\\boxed{8}", "\\boxed{8}"])])
    extras = [[("\\boxed{4}", 2)] * 3] * 2 + [[("\\boxed{9}", 2)] * 3] * 2
    reward.extra_votes = lambda prompts, k: pytest.fail("votes drawn with the rollouts are not drawn again")
    assert reward(**batch, extra_votes=extras, trainer_state=None) == [0.0, 1.0, 0.0, 0.0]
    assert [v.label for v in log.votes] == ["4", "9"]
    assert reward.ledger.totals.calls == 10


def test_random_downsampling_rewards_the_samples_trl_trains_on(tmp_path):
    """With downsample=random the trained samples sit at random places among the votes; each reward must still
    be the reward of the completion TRL trains with it."""
    reward, log = _reward(tmp_path, n_vote=8, n_train=4, downsample="random")
    trained = ["\\boxed{1}", "\\boxed{2}", "\\boxed{1}", "\\boxed{2}"]
    reward.extra_votes = lambda prompts, k: [[("\\boxed{1}", 2)] * k for _ in prompts]
    for _ in range(5):  # several draws of the kept places
        rewards = reward(**_batch([("p1", trained)]), trainer_state=None)
        assert log.votes[-1].label == "1"
        assert rewards == [1.0, 0.0, 1.0, 0.0]
        assert log.votes[-1].answers == ("1", "2", "1", "2")


def test_extra_votes_on_vllm_use_the_colocated_engines_sampling_settings():
    from testtime.methods.ttrl.rollouts import vllm_sampling

    trl_generation = SimpleNamespace(
        temperature=1.0,
        top_p=0.9,
        top_k=0,
        min_p=None,
        repetition_penalty=1.0,
        max_completion_length=32,
        generation_kwargs={"seed": 3},
    )
    assert vllm_sampling(trl_generation, 8) == {
        "n": 8,
        "repetition_penalty": 1.0,
        "temperature": 1.0,
        "top_p": 0.9,
        "top_k": 0,
        "min_p": 0.0,
        "max_tokens": 32,
        "seed": 3,
    }


def test_trained_tokens_are_counted_once_per_generation_batch(tmp_path):
    """TRL logs its running token count only with the optimiser step that generated: the steps between must
    neither lose the count nor start it again from zero."""
    pytest.importorskip("transformers")
    from testtime.methods.ttrl.trl_backend import make_callback
    from testtime.methods.ttrl.trl_reward import StepBuffer

    settings = TTRLSettings.from_options({"preset": "cpu", "collapse": "off"})
    ledger = Ledger(tmp_path / "ledger.jsonl")
    job = SimpleNamespace(settings=settings, root=tmp_path, model_name="hf:test", ledger=ledger, earlier_steps=())
    callback = make_callback(job, StepBuffer(), parameters=10, started_step=0)
    running = {1: 100, 5: 220, 9: 330}  # three generation batches of 100, 120 and 110 tokens
    for step in range(1, 10):
        logs = {"loss": 0.1} | ({"num_tokens": running[step]} if step in running else {})
        callback.on_log(None, SimpleNamespace(global_step=step), SimpleNamespace(), logs=logs)
    ledger.close()
    counted = [e.train_tokens for e in read_entries(tmp_path / "ledger.jsonl") if e.kind == "train_step"]
    assert counted == [100, 0, 0, 0, 120, 0, 0, 0, 110]


def test_an_online_update_alarm_sees_the_steps_of_the_updates_before_it(tmp_path):
    """A stream's update trains a few steps: on its own it could never fill the alarm's windows (2 × 5)."""
    from testtime.core.results import TTRLStep
    from testtime.methods.ttrl.monitor import primed_alarm
    from testtime.methods.ttrl.trl_reward import append_step

    earlier = [tmp_path / f"update-{k}.jsonl" for k in (1, 2)]
    for path, (ratio, entropy, length) in zip(earlier, [(0.6, 0.5, 100), (0.99, 0.01, 20)], strict=True):
        for step in range(4):
            append_step(path, TTRLStep(step=step, majority_ratio=ratio, entropy=entropy, mean_length=length))
    collapsing = {"majority_ratio": 0.99, "entropy": 0.01, "mean_length": 20}
    fired = primed_alarm(earlier).update(collapsing)  # the 9th step it has seen: one short of its windows
    assert fired is None
    primed = primed_alarm(earlier)
    primed.update(collapsing)
    reason = primed.update(collapsing)
    assert reason and "collapse" in reason
    assert primed_alarm([tmp_path / "none.jsonl"]).update(collapsing) is None  # nothing written: a fresh alarm


def test_adaptive_draws_no_vote_only_samples_for_a_group_its_trained_samples_settle(tmp_path):
    """--adaptive in training (OptPO's idea): the N_train trained samples are GRPO's and never cut; a prompt whose
    trained samples already settle its vote at N_vote draws none of its vote-only samples, one split still does."""
    from testtime.core.adaptive import Adaptive

    reward, log = _reward(tmp_path, n_vote=12, n_train=4)
    reward.vote_stop = Adaptive(rule="exact")  # p1: 4 of 4 agree, but 8 more could still outvote them
    asked: list[int] = []

    def extra(prompts, k):
        asked.append(len(prompts))
        return [[("\\boxed{3}", 2)] * k for _ in prompts]

    reward.extra_votes = extra
    batch = _batch([("p1", ["\\boxed{3}"] * 4), ("p2", ["\\boxed{8}", "\\boxed{9}", "\\boxed{8}", "\\boxed{9}"])])
    reward(**batch, trainer_state=None)
    assert asked == [2]  # exact: no group of 4 settles a vote of 12
    reward.vote_stop = Adaptive(rule="posterior", threshold=0.95)  # 4 agreeing: 31/32 > 0.95, p1 settles
    asked.clear()
    reward(**batch, trainer_state=None)
    assert asked == [1] and len(log.votes[-2].votes) == 4 and len(log.votes[-1].votes) == 12
    vote_lines = [e for e in read_entries(tmp_path / "ledger.jsonl") if e.purpose == "ttrl_vote"]
    assert len(vote_lines) == 8 + 8 + 8  # first step: both groups' 8 extras; second: p2's only
