"""TTRL settings: the paper's defaults, the cpu preset, overrides and clear errors."""

import pytest

from testtime.core.errors import UserError
from testtime.methods.ttrl.recipe import TTRLSettings


def test_paper_defaults():
    s = TTRLSettings.from_options({})
    assert (s.n_vote, s.n_train, s.lr, s.beta, s.max_response) == (64, 32, 5e-7, 0.001, 3072)
    assert (s.lr_scheduler, s.warmup_ratio, s.eval_samples, s.eval_temperature, s.eval_top_p) == (
        "cosine",
        0.03,
        16,
        0.6,
        0.95,
    )
    assert s.train_temperature("hf:Qwen2.5-Math-7B") == 1.0
    assert s.train_temperature("hf:Llama-3.1-8B-Instruct") == 0.6
    assert s.rollout_steps(30) == 10 * (30 // 8)


def test_cpu_preset_then_explicit_options_on_top():
    s = TTRLSettings.from_options({"preset": "cpu", "lr": "1e-5", "steps": "3"})
    assert (s.n_vote, s.n_train, s.prompts_per_step, s.beta) == (16, 8, 4, 0.0)
    assert s.lr == 1e-5 and s.rollout_steps(48) == 3
    assert s.train_temperature("hf:smollm2-135m") == 1.0 and s.eval_temperature == 1.0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"preset": "gpu"}, "unknown preset"),
        ({"n_vote": "4", "n_train": "8"}, "cannot exceed n_vote"),
        ({"lr": "fast"}, "ttrl option lr"),
        ({"prompts_per_step": "3", "mini_batch_prompts": "2"}, "multiple of mini_batch_prompts"),
        ({"colour": "blue"}, "ttrl does not take option 'colour'"),
        ({"n_votes": "8"}, "did you mean n_vote"),
        ({"report_to": "mlflow"}, "unknown tracker 'mlflow'"),
    ],
)
def test_bad_options_are_user_errors(options, message):
    with pytest.raises(UserError, match=message):
        TTRLSettings.from_options(options)


@pytest.mark.parametrize(
    ("bench", "problems", "steps", "batch"),
    [("aime24", 30, 240, 8), ("aime25", 30, 240, 8), ("amc23", 40, 150, 8), ("math500", 500, 150, 32)],
)
def test_paper_preset_follows_each_tasks_schedule(bench, problems, steps, batch):
    s = TTRLSettings.from_options({}).for_benchmark(bench, set())
    assert s.prompts_per_step == batch and s.rollout_steps(problems) == steps  # TTRL's scripts: 80/30/10 epochs
    assert (s.n_vote, s.n_train) == (64, 32)


def test_what_the_user_set_wins_over_the_tasks_schedule():
    s = TTRLSettings.from_options({"epochs": "2"}).for_benchmark("aime24", {"epochs"})
    assert s.epochs == 2 and s.prompts_per_step == 8
    cpu = TTRLSettings.from_options({"preset": "cpu"}).for_benchmark("aime24", set())
    assert cpu.epochs == 10 and cpu.steps == 8  # only the paper preset has per-task schedules


def test_a_tracker_is_passed_to_trl_when_installed():
    pytest.importorskip("tensorboard")
    assert TTRLSettings.from_options({"report_to": "tensorboard"}).report_to == "tensorboard"


def test_a_run_on_its_presets_tuning_set_is_warned_at_start(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The README's, getting-started's and running.md's TTRL examples ran on the set the cpu preset was tuned on,
    and nothing said so; the paper preset's benchmarks are its authors' tuning set (transductive by design)."""
    from testtime.methods.ttrl.recipe import TUNED_ON, on_tuned_set
    from testtime.run import lifecycle
    from testtime.run.settings import RunSettings

    cpu = {"method": "ttrl", "bench": "arith", "model": "hf:smollm2-135m", "method_options": {"preset": "cpu"}}
    opened = lifecycle.create(RunSettings(**cpu, limit=2), tmp_path / "tuned")
    opened.release()
    held = lifecycle.create(RunSettings(**cpu, limit=2, bench_options={"seed": 1}), tmp_path / "held")
    held.release()
    assert any("not held out: arith with digits=2, ops=+, seed=0" in n for n in opened.notes)
    assert not any("held out" in n for n in held.notes)
    paper = TUNED_ON["paper"]
    assert on_tuned_set(paper, {"name": "aime24"}) and not on_tuned_set(paper, {"name": "aime26"})
    assert on_tuned_set(TUNED_ON["cpu"], {"name": "arith", "digits": 2, "ops": "+", "seed": 0, "size": 16})
    assert not on_tuned_set(TUNED_ON["cpu"], {"name": "arith", "digits": 3, "ops": "+", "seed": 0})
