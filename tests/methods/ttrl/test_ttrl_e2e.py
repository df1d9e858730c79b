"""TTRL end to end through the CLI: refusals before any trace, and a real 4-step run on the embedded model that
is killed (-9) after its first checkpoint, resumed, stopped by SIGTERM at a step, and resumed to the end."""

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testtime.core.ledger import read_entries
from testtime.experiments.curves import run_points

PAGE = Path(__file__).resolve().parents[3] / "docs" / "methods" / "ttrl.md"
SEED_ROWS = ("| **0 (the command's)** |", "| 1 |", "| 2 |")  # the miniature's table, one row per --seed


def page_rows() -> list[tuple[float, float]]:
    """(pass@1 after, paired gain) of each seed's row in the miniature table of docs/methods/ttrl.md."""
    text = PAGE.read_text(encoding="utf-8")
    section = text[text.index("## TTRL, measured") :]
    rows = []
    for start in SEED_ROWS:
        cells = next(line for line in section.splitlines() if line.startswith(start)).split("|")
        after = float(re.findall(r"\d\.\d{3}", cells[2])[-1])
        gain = float(re.search(r"[+-]\d\.\d{3}", cells[3].replace("\u2212", "-")).group())
        rows.append((after, gain))
    return rows


def test_api_models_are_refused_before_a_run_directory_exists(testtime_cli, tmp_path):
    out = tmp_path / "run"
    done = testtime_cli("run", "--method", "ttrl", "--model", "fake:echo", "--out", str(out))
    assert done.returncode == 2
    assert "hf:" in done.stderr and "Traceback" not in done.stderr
    assert not out.exists()


def test_bad_ttrl_options_are_user_errors(testtime_cli, tmp_path):
    done = testtime_cli("run", "--method", "ttrl", "--preset", "gpu", "--out", str(tmp_path / "r"))
    assert done.returncode == 2 and "unknown preset" in done.stderr
    done = testtime_cli("run", "--method", "ttrl", "--n-vote", "2", "--n-train", "4", "--out", str(tmp_path / "r"))
    assert done.returncode == 2 and "cannot exceed n_vote" in done.stderr


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_training_survives_a_kill_and_stops_at_a_step_on_sigterm(tmp_path, scripted_model):
    run = tmp_path / "run"
    args = [sys.executable, "-m", "testtime.cli", "run", "--method", "ttrl", "--preset", "cpu", "--bench", "arith"]
    args += ["--bench-opt", "size=4", "--steps", "4", "--n", "2", "--quiet", "--model", scripted_model]
    # 2 prompts per rollout step, one update each; 12 votes of which 8 are trained (4 extra votes per prompt)
    for option in ("save_steps=1", "prompts_per_step=2", "mini_batch_prompts=2", "n_vote=12", "report_to=tensorboard"):
        args += ["--method-opt", option]
    resume = [sys.executable, "-m", "testtime.cli", "run", "--resume", str(run), "--quiet"]

    def until_checkpoint(process: subprocess.Popen, step: int) -> None:
        saved = run / "ttrl" / "checkpoints" / f"checkpoint-{step}" / "trainer_state.json"
        deadline = time.time() + 600
        while time.time() < deadline and not saved.exists() and process.poll() is None:
            time.sleep(0.2)
        assert saved.exists(), process.communicate()[1][-3000:] if process.poll() is not None else "no checkpoint"

    first = subprocess.Popen([*args, "--out", str(run)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    until_checkpoint(first, 1)
    first.send_signal(signal.SIGKILL)
    first.communicate()
    assert not (run / "ttrl" / "final").exists()

    # SIGTERM mid-training: the step in flight finishes and is checkpointed, training ends there, the run says
    # how to resume and exits 128 + 15 (before, the trainer's thread trained on to the last step)
    second = subprocess.Popen(resume, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    until_checkpoint(second, 2)
    second.send_signal(signal.SIGTERM)
    _, stderr = second.communicate(timeout=300)
    assert second.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert "--resume" in stderr and not (run / "ttrl" / "final").exists()
    trained_so_far = [json.loads(line)["step"] for line in (run / "ttrl" / "steps.jsonl").read_text().splitlines()]
    assert trained_so_far in ([1, 2], [1, 2, 3])

    resumed = subprocess.run(resume, capture_output=True, text=True, timeout=900)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "'loss'" not in resumed.stdout + resumed.stderr  # TRL's metric dicts go to steps.jsonl, not the console
    steps = [json.loads(line)["step"] for line in (run / "ttrl" / "steps.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]  # each step trained once: the checkpoints were resumed, never retrained
    kept = sorted(p.name for p in (run / "ttrl" / "checkpoints").glob("checkpoint-*"))
    assert kept == ["checkpoint-4"]  # only the last is kept: each holds the weights and the optimiser's state
    train_lines = [e for e in read_entries(run / "ledger.jsonl") if e.kind == "train_step"]
    assert [e.step for e in train_lines] == [1, 2, 3, 4]
    assert all(e.train_tokens > 0 and (e.flops or 0) > 0 for e in train_lines)

    base, trained = _weights(Path(scripted_model.removeprefix("hf:"))), _weights(run / "ttrl" / "final")
    changed = [name for name, tensor in trained.items() if not tensor.float().equal(base[name].float())]
    assert len(changed) > len(trained) // 2  # GRPO moved most parameter tensors

    summary = json.loads((run / "summary.json").read_text())
    ttrl = summary["ttrl"]
    assert summary["problems"] == 4 and summary["complete"] and summary["stopped"] is None
    assert "seed=0 is the set every recipe of this preset was tried on" in summary["on_tuned_set"]  # not held out
    assert set(ttrl) >= {"pass@1_before", "pass@1_after", "pass@1_gain", "maj@k_before", "per_step"}
    assert ttrl["per_step"]["step"] == [1, 2, 3, 4]
    assert summary["ledger"]["train_steps"] == 4
    compute = ttrl["compute"]  # on the compute frontier: training counted, beside the base majority there
    assert compute["tokens_per_problem"] > compute["train_tokens"] / 4 > 0
    assert summary["same_budget_majority_n"] == compute["same_tokens_k"] >= 2
    [point] = run_points(run)
    assert point.series == "ttrl (after training)" and point.tokens == compute["tokens_per_problem"]
    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    voted = [v for r in records for v in r["ttrl"]["votes"]]
    assert len(voted) == 8 and all(len(v["answers"]) == 8 for v in voted)  # 4 steps × 2 prompts, 8 trained each
    assert list((run / "ttrl" / "tensorboard").glob("**/events.out.tfevents*"))  # TRL's metrics, to a tracker
    purposes = [e.purpose for e in read_entries(run / "ledger.jsonl")]
    assert purposes.count("ttrl_vote") >= 8 * 4  # the extra votes are in the ledger too (a killed step's as well)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_two_steps_on_code_reward_programs_by_the_execution_selector(
    tmp_path, shared_data, open_sandbox_or_skip, scripted_coder
):
    """`--method ttrl --bench lcb-v6` on the scripted coder (a fenced `print(1)` or `print(2)`): the base model
    writes test inputs once, every step runs the policy's programs in the sandbox, the reward is agreement with
    the selected behaviour class."""
    run = tmp_path / "code"
    args = ["run", "--method", "ttrl", "--preset", "cpu", "--bench", "lcb-v6", "--data-dir", str(shared_data)]
    args += ["--limit", "2", "--steps", "2", "--n", "2", "--quiet", "--out", str(run), "--model", scripted_coder]
    for option in ("prompts_per_step=2", "mini_batch_prompts=2", "n_vote=6", "n_train=2", "max_response=24"):
        args += ["--method-opt", option]
    done = subprocess.run([sys.executable, "-m", "testtime.cli", *args], capture_output=True, text=True, timeout=1700)
    assert done.returncode == 0, done.stderr[-3000:]
    entries = read_entries(run / "ledger.jsonl")
    assert [e.step for e in entries if e.kind == "train_step"] == [1, 2]
    assert any(e.kind == "sandbox" and e.purpose == "ttrl_reward" and e.seconds > 0 for e in entries)
    assert any(e.purpose == "tests" and e.step == 0 for e in entries)  # the inputs, written once before training
    steps = [json.loads(line) for line in (run / "ttrl" / "steps.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2]
    assert all("distinct_classes" in s and "no_answer_rate" in s and "majority_ratio" in s for s in steps)
    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    votes = [v for r in records for v in r["ttrl"]["votes"]]
    assert len(votes) == 4 and all(len(v["answers"]) == 2 and len(v["rewards"]) == 2 for v in votes)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["ttrl"]["per_step"]["step"] == [1, 2]  # audited against the tests, outside the method
    assert summary["graded_on_public_tests_only"] == 2  # the development copy has no private tests


@pytest.mark.slow
@pytest.mark.miniature
@pytest.mark.timeout(3600)
def test_miniature_raises_pass_at_1_without_labels(tmp_path):
    from testtime.experiments.ttrl_miniature import report_lines, run_miniature

    summary = run_miniature(tmp_path / "mini")
    print("\n".join(report_lines(summary)))
    ttrl = summary.ttrl
    assert ttrl is not None and ttrl.pass_at_1_gain.interval == "paired_bootstrap"
    assert ttrl.pass_at_1_gain.ci_low > 0  # the paired bootstrap CI excludes zero
    assert ttrl.pass_at_1_after.mean >= ttrl.pass_at_1_before.mean + 0.05
    assert (tmp_path / "mini" / "ttrl_curve.png").stat().st_size > 10_000
    # The page's seed-0 row is this run: another CPU may round it apart as far as the seeds spread, no further.
    rows = page_rows()
    for index, measured in enumerate((ttrl.pass_at_1_after.mean, ttrl.pass_at_1_gain.mean)):
        spread = max(row[index] for row in rows) - min(row[index] for row in rows)
        assert abs(measured - rows[0][index]) <= spread, (measured, rows[0][index], spread)


def test_the_ttrl_page_shows_the_miniature_at_three_seeds():
    rows = page_rows()
    assert len(set(rows)) == 3, "three seeds, three different runs"
    assert all(0 < after <= 1 and -1 <= gain <= 1 for after, gain in rows)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_ttrl_trains_on_an_unlabelled_file_and_writes_its_model_and_predictions(tmp_path, scripted_model):
    """A user's own problems with no answers: TTRL trains on them (the vote needs no label), saves the adapted
    model, and the run reports label-free quantities and predictions, never an accuracy."""
    data = tmp_path / "mine.jsonl"
    data.write_text("".join(json.dumps({"question": f"What is {a} + {a + 1}?"}) + "\n" for a in range(11, 15)))
    run = tmp_path / "run"
    args = ["run", "--method", "ttrl", "--preset", "cpu", "--bench", str(data), "--steps", "1", "--n", "2"]
    args += ["--model", scripted_model]
    args += ["--method-opt", "prompts_per_step=2", "--method-opt", "mini_batch_prompts=2", "--quiet", "--out", str(run)]
    done = subprocess.run([sys.executable, "-m", "testtime.cli", *args], capture_output=True, text=True, timeout=1100)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (run / "ttrl" / "final" / "model.safetensors").is_file()  # the adapted model, ready to use
    summary = json.loads((run / "summary.json").read_text())
    assert summary["accuracy"] is None and summary["ttrl"] is None and summary["unlabelled"] == 4
    assert summary["ledger"]["train_steps"] == 1 and len(summary["label_free"]["ttrl_majority_ratio"]) == 1
    predictions = [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]
    assert [p["id"] for p in predictions] == ["mine-1", "mine-2", "mine-3", "mine-4"]
    assert all(p["method"] == "ttrl" and p["samples"] == 2 for p in predictions)
    assert all(p["confidence"] is None or 0 <= p["confidence"] <= 1 for p in predictions)
    assert all(p["step"] == 1 for p in predictions)  # every answer came from the weights after step 1


@pytest.mark.slow
def test_two_runs_in_one_process_each_log_to_their_own_tensorboard(tmp_path, scripted_model, testtime_cli):
    """From the API or a notebook, one process runs TTRL twice: the second run's tracker logs land in its own
    directory (the first run's folder once stayed in the environment, and took them)."""
    for name in ("first", "second"):
        args = ["run", "--method", "ttrl", "--preset", "cpu", "--bench", "arith", "--bench-opt", "size=2"]
        args += ["--steps", "1", "--n", "1", "--model", scripted_model, "--out", str(tmp_path / name), "--quiet"]
        for option in ("prompts_per_step=2", "mini_batch_prompts=2", "n_vote=2", "n_train=2", "report_to=tensorboard"):
            args += ["--method-opt", option]
        done = testtime_cli(*args)
        assert done.returncode == 0, done.stderr[-3000:]
        assert list((tmp_path / name / "ttrl" / "tensorboard").glob("**/events.out.tfevents*")), name
