"""verl integration on CPU: the vote hook on verl's own DataProto, the trainer's hook wiring, the parquet
rows, and the generated Hydra configuration checked by verl's own loader and validator."""

import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest

from testtime.core.records import Message, Problem, TestCase
from testtime.methods.ttrl.recipe import TTRLSettings
from testtime.methods.ttrl.vote import VotePolicy
from testtime.run.directory import RunDir
from testtime.selectors import SelectionContext, build_selector

pytestmark = pytest.mark.extras
verl = pytest.importorskip("verl", reason="needs verl: bash scripts/install --verl")  # CI's extras stage
torch = pytest.importorskip("torch")
from verl import DataProto  # noqa: E402

from testtime.methods.ttrl.verl.config import compose, ttrl_overrides, validate  # noqa: E402
from testtime.methods.ttrl.verl.data import verl_rows, write_parquet  # noqa: E402
from testtime.methods.ttrl.verl.hook import apply_ttrl_vote  # noqa: E402


class CharTokenizer:
    """One token per character; 0 is padding."""

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "".join(chr(int(i)) for i in ids if int(i))


def _batch(responses: list[str], prompt_len: int = 3) -> DataProto:
    tok = CharTokenizer()
    width = max(len(r) for r in responses) + 2
    rows = torch.zeros(len(responses), width, dtype=torch.long)
    mask = torch.zeros(len(responses), prompt_len + width, dtype=torch.long)
    mask[:, :prompt_len] = 1
    for i, text in enumerate(responses):
        ids = tok.encode(text)
        rows[i, : len(ids)] = torch.tensor(ids)
        mask[i, prompt_len : prompt_len + len(ids)] = 1
    return DataProto.from_dict(
        tensors={
            "prompts": torch.ones(len(responses), prompt_len, dtype=torch.long),
            "responses": rows,
            "attention_mask": mask,
        }
    )


MATH = Problem(id="m", domain="math", statement="")


def _vote(data: DataProto, uids: list[str], problems=None, context=None) -> dict[str, float]:
    problems = problems or [MATH] * len(uids)
    selector = build_selector("execution" if problems[0].domain == "code" else "majority")
    context = context or (lambda _: SelectionContext())
    metrics, _ = apply_ttrl_vote(data, uids, problems, CharTokenizer(), VotePolicy(), selector, context)
    return metrics


def test_vote_hook_rewards_each_uid_group_at_the_last_valid_token():
    responses = ["\\boxed{4}", "\\boxed{4}", "\\boxed{5}", "\\boxed{10}", "none", "\\boxed{10.0}"]
    uids = ["a", "a", "a", "b", "b", "b"]
    data = _batch(responses)
    metrics = _vote(data, uids)
    scores = data.batch["rm_scores"]
    assert scores.sum(dim=-1).tolist() == [1.0, 1.0, 0.0, 1.0, 0.0, 1.0]  # 10 and 10.0 are one answer
    for i, text in enumerate(responses):
        assert scores[i, len(text) - 1] == scores[i].sum()  # placed on the last valid token
    assert list(data.non_tensor_batch["ttrl_label"]) == ["4", "4", "4", "10", "10", "10"]
    assert list(data.non_tensor_batch["ttrl_pred"]) == ["4", "4", "5", "10", "", "10.0"]
    assert set(data.meta_info["reward_extra_keys"]) >= {"ttrl_label", "ttrl_majority_ratio", "ttrl_pred"}
    assert metrics["ttrl/majority_ratio"] == pytest.approx(2 / 3)


def test_vote_hook_groups_by_uid_not_by_position():
    data = _batch(["\\boxed{1}", "\\boxed{2}", "\\boxed{1}", "\\boxed{2}"])
    _vote(data, ["x", "y", "x", "y"])
    assert data.batch["rm_scores"].sum(dim=-1).tolist() == [1.0, 1.0, 1.0, 1.0]


def test_vote_hook_skips_an_all_abstain_group():
    data = _batch(["no", "answer"])
    metrics = _vote(data, ["a", "a"])
    assert data.batch["rm_scores"].abs().sum() == 0
    assert metrics["ttrl/skipped_prompts"] == 1.0


def test_vote_hook_runs_the_code_reward_from_the_rows_problems(open_sandbox_or_skip):
    problem = Problem(
        id="double", domain="code", statement="Print twice N.", public_tests=(TestCase(input="2", output="4"),)
    )
    programs = ["print(int(input()) * 2)", "print(int(input()) ** 2)", "n = int(input())\nprint(n + n)", "no code"]
    data = _batch([f"```python\n{p}\n```" if "print" in p else p for p in programs])
    context = lambda _: SelectionContext(sandbox=open_sandbox_or_skip, inputs=["3", "7"])  # noqa: E731
    metrics = _vote(data, ["u"] * 4, [problem] * 4, context)
    assert data.batch["rm_scores"].sum(dim=-1).tolist() == [1.0, 0.0, 1.0, 0.0]
    assert metrics["ttrl/distinct_classes"] == 2.0 and metrics["ttrl/no_answer_rate"] == 0.25


def test_trainer_hook_votes_what_the_rollout_manager_returns(tmp_path):
    from testtime.methods.ttrl.verl.trainer import TTRLRayPPOTrainer

    class Rollouts:
        def generate_sequences(self, batch):
            return _batch(["\\boxed{7}", "\\boxed{7}", "\\boxed{3}"])

    from testtime.methods.ttrl.verl.config import write_settings

    trainer = TTRLRayPPOTrainer.__new__(TTRLRayPPOTrainer)  # no Ray, no GPUs: only the hook's wiring
    trainer.async_rollout_manager, trainer.tokenizer = Rollouts(), CharTokenizer()
    settings = write_settings(TTRLSettings.from_options({"n_vote": 3, "n_train": 3}), tmp_path / "ttrl.json")
    trainer.config = {"ttrl": {"settings_file": str(settings)}}
    trainer.install_vote_hook()
    prompts = DataProto.from_dict(
        tensors={"input_ids": torch.zeros(3, 2, dtype=torch.long)},
        non_tensors={"uid": np.array(["u", "u", "u"], dtype=object)},
    )
    output = trainer.async_rollout_manager.generate_sequences(prompts)
    assert output.batch["rm_scores"].sum(dim=-1).tolist() == [1.0, 1.0, 0.0]
    assert output.meta_info["metrics"]["ttrl/majority_ratio"] == pytest.approx(2 / 3)


def test_the_vote_sees_n_vote_responses_and_only_the_n_train_are_rewarded(tmp_path):
    """rollout.n = n_train = 3 trained responses per prompt; 2 more are sampled at the barrier to vote only. Here
    the vote-only ones decide the label (7 wins 3 to 2, where the trained ones alone would say 3)."""
    from testtime.methods.ttrl.verl.config import write_settings
    from testtime.methods.ttrl.verl.trainer import TTRLRayPPOTrainer

    class Rollouts:
        def __init__(self):
            self.asked = []

        def generate_sequences(self, batch):
            self.asked.append(list(batch.non_tensor_batch["uid"]))
            if len(batch) == 6:  # the trained rollouts: two prompts, three each
                return _batch(["\\boxed{7}", "\\boxed{3}", "\\boxed{3}", "\\boxed{1}", "\\boxed{1}", "\\boxed{2}"])
            return _batch(["\\boxed{7}", "\\boxed{7}", "\\boxed{2}", "\\boxed{2}"])  # vote-only, interleaved

    rollouts = Rollouts()
    trainer = TTRLRayPPOTrainer.__new__(TTRLRayPPOTrainer)
    trainer.async_rollout_manager, trainer.tokenizer = rollouts, CharTokenizer()
    settings = write_settings(TTRLSettings.from_options({"n_vote": 5, "n_train": 3}), tmp_path / "ttrl.json")
    trainer.config = {"ttrl": {"settings_file": str(settings)}}
    trainer.install_vote_hook()
    prompts = DataProto.from_dict(
        tensors={"input_ids": torch.arange(12).reshape(6, 2)},
        non_tensors={"uid": np.array(["a", "a", "a", "b", "b", "b"], dtype=object)},
    )
    output = trainer.async_rollout_manager.generate_sequences(prompts)
    assert rollouts.asked[1] == ["a", "a", "b", "b"]  # each prompt's first row, twice, uid kept
    assert len(output) == 6  # verl unions these with its repeated batch: the vote-only rows are gone
    assert output.batch["rm_scores"].sum(dim=-1).tolist() == [1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert list(output.non_tensor_batch["ttrl_label"]) == ["7", "7", "7", "2", "2", "2"]
    assert output.meta_info["metrics"]["ttrl/vote_only_responses"] == 4.0
    assert output.meta_info["metrics"]["ttrl/majority_ratio"] == pytest.approx(3 / 5)


def test_each_training_step_is_recorded_as_a_trl_run_records_it_and_validation_is_not(tmp_path):
    """At the barrier of verl's step 4: a `ttrl_rollout` ledger line per trained response and a `ttrl_vote` line
    per vote-only one (prompt and response tokens from the masks), one `train_step` line (the trained rows'
    tokens; FLOPs from the weights' parameter count, read from the safetensors header), and one steps.jsonl
    line with every prompt's vote. A validation batch through the same rollout manager records nothing."""
    from safetensors.torch import save_file

    from testtime.core.ledger import read_entries
    from testtime.core.results import read_steps
    from testtime.methods.ttrl.verl.config import write_settings
    from testtime.methods.ttrl.verl.trainer import TTRLRayPPOTrainer

    class Rollouts:
        def generate_sequences(self, batch):
            if len(batch) == 6:
                return _batch(["\\boxed{7}", "\\boxed{3}", "\\boxed{7}", "\\boxed{2}", "\\boxed{2}", "\\boxed{25}"])
            return _batch(["\\boxed{7}", "\\boxed{7}", "\\boxed{2}", "\\boxed{2}"])

    weights = tmp_path / "base"
    weights.mkdir()
    save_file({"w": torch.zeros(3, 4), "b": torch.zeros(5)}, str(weights / "model.safetensors"))  # 17 parameters
    record = tmp_path / "verl"
    trainer = TTRLRayPPOTrainer.__new__(TTRLRayPPOTrainer)
    trainer.async_rollout_manager, trainer.tokenizer = Rollouts(), CharTokenizer()
    settings = write_settings(TTRLSettings.from_options({"n_vote": 5, "n_train": 3}), tmp_path / "ttrl.json")
    trainer.config = {
        "ttrl": {"settings_file": str(settings), "record_dir": str(record)},
        "actor_rollout_ref": {"model": {"path": str(weights)}},
    }
    trainer.install_vote_hook()
    problems = [Problem(id=pid, domain="math", statement="") for pid in ("pa", "pa", "pa", "pb", "pb", "pb")]
    prompts = DataProto.from_dict(
        tensors={"input_ids": torch.arange(12).reshape(6, 2)},
        non_tensors={
            "uid": np.array(["a", "a", "a", "b", "b", "b"], dtype=object),
            "extra_info": np.array([{"problem": p.model_dump_json()} for p in problems], dtype=object),
        },
        meta_info={"global_steps": 4},
    )
    trainer.async_rollout_manager.generate_sequences(prompts)
    entries = read_entries(record / "ledger.jsonl")
    rollouts = [e for e in entries if e.purpose == "ttrl_rollout"]
    assert [(e.problem_id, e.sample_index, e.step) for e in rollouts] == [
        ("pa", 0, 4), ("pa", 1, 4), ("pa", 2, 4), ("pb", 0, 4), ("pb", 1, 4), ("pb", 2, 4)
    ]  # fmt: skip
    assert [(e.prompt_tokens, e.completion_tokens) for e in rollouts] == [(3, 9)] * 5 + [(3, 10)]
    assert rollouts[0].model == f"hf:{weights}"
    assert [(e.problem_id, e.completion_tokens) for e in entries if e.purpose == "ttrl_vote"] == [("pa", 9)] * 2 + [
        ("pb", 9)
    ] * 2
    [step] = [e for e in entries if e.kind == "train_step"]
    trained_tokens, rollout_tokens = 6 * 12 + 1, 10 * 12 + 1
    assert step.step == 4 and step.train_tokens == trained_tokens
    assert step.flops == 6 * 17 * trained_tokens + 2 * 17 * rollout_tokens + 2 * 17 * trained_tokens  # beta > 0
    [line] = read_steps(record / "ttrl" / "steps.jsonl")
    assert line.step == 4 and [(v.problem_id, v.label, v.step) for v in line.votes] == [("pa", "7", 4), ("pb", "2", 4)]
    assert line.majority_ratio == pytest.approx((4 / 5 + 4 / 5) / 2)

    validation = DataProto.from_dict(
        tensors={"input_ids": torch.arange(12).reshape(6, 2)},
        non_tensors={"uid": np.array(["a", "a", "a", "b", "b", "b"], dtype=object)},
        meta_info={"validate": True, "global_steps": 4},
    )
    trainer.async_rollout_manager.generate_sequences(validation)
    assert (
        len(read_entries(record / "ledger.jsonl")) == len(entries)
        and len(read_steps(record / "ttrl" / "steps.jsonl")) == 1
    )


def test_vote_only_batch_takes_each_prompts_first_row():
    from testtime.methods.ttrl.verl.hook import vote_only_batch

    batch = DataProto.from_dict(
        tensors={"input_ids": torch.tensor([[0], [0], [1], [1], [2], [2]])},
        non_tensors={"uid": np.array(["x", "x", "y", "y", "z", "z"], dtype=object)},
    )
    more = vote_only_batch(batch, list(batch.non_tensor_batch["uid"]), 3)
    assert more.batch["input_ids"].flatten().tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert list(more.non_tensor_batch["uid"]) == ["x"] * 3 + ["y"] * 3 + ["z"] * 3


@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_a_multi_node_configuration_composes_and_validates(nodes):
    config = compose(_overrides(TTRLSettings.from_options({}), nnodes=nodes))
    validate(config)  # verl's own checks: 8 prompts × 32 responses split over nodes × 8 GPUs
    assert (config.trainer.nnodes, config.trainer.n_gpus_per_node) == (nodes, 8)
    assert config.actor_rollout_ref.rollout.n == 32


def test_a_batch_too_small_for_the_cluster_is_refused_in_one_line(testtime_cli, tmp_path):
    done = testtime_cli(
        "ttrl", "verl", "--model", "/m", "--bench", "arith", "--out", str(tmp_path / "v"), "--nnodes", "4",
        "--n-train", "4", "--method-opt", "prompts_per_step=2", timeout=300,
    )  # fmt: skip
    assert done.returncode == 2 and "verl rejects this configuration" in done.stderr and "Traceback" not in done.stderr
    bad = testtime_cli(
        "ttrl", "verl", "--model", "/m", "--bench", "arith", "--out", str(tmp_path / "w"), "--nnodes", "0"
    )
    assert bad.returncode != 0 and "--nnodes must be at least 1" in bad.stderr


def test_the_cli_writes_a_ray_job_launcher_for_the_cluster(testtime_cli, tmp_path):
    out = tmp_path / "cluster"
    done = testtime_cli(
        "ttrl", "verl", "--model", "/models/m", "--bench", "arith", "--out", str(out), "--nnodes", "2",
        "--gpus-per-node", "4", "--ray-address", "http://head:8265", timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    overrides = (out / "overrides.txt").read_text().splitlines()
    assert "trainer.nnodes=2" in overrides and "trainer.n_gpus_per_node=4" in overrides
    words = shlex.split((out / "submit.sh").read_text().splitlines()[-1])
    assert words[:5] == ["exec", "ray", "job", "submit", "--address"] and words[5] == "http://head:8265"
    assert words[7:10] == ["python3", "-m", "testtime.methods.ttrl.verl.trainer"]
    assert words[10:-1] == overrides  # the same validated configuration
    assert "2 node(s) × 4 GPU(s)" in done.stdout


def test_parquet_rows_carry_no_label(tmp_path):
    problems = [Problem(id=f"p{i}", domain="math", statement=f"What is {i} + 1?") for i in range(3)]
    rows = verl_rows(problems, lambda p: [Message(role="user", content=p.statement)], "testtime/arith")
    train, val = write_parquet(rows, tmp_path)
    import pyarrow.parquet as pq

    table = pq.read_table(train).to_pylist()
    assert [r["extra_info"]["index"] for r in table] == ["p0", "p1", "p2"]
    assert Problem.model_validate_json(table[1]["extra_info"]["problem"]) == problems[1]  # what the hook reads
    assert all(r["reward_model"]["ground_truth"] == "" for r in table)
    assert table[0]["prompt"] == [{"role": "user", "content": "What is 0 + 1?"}]
    assert pq.read_table(val).num_rows == 3


def _overrides(settings: TTRLSettings, nnodes: int | None = None, **extra) -> list[str]:
    return ttrl_overrides(
        settings,
        model_path="/models/Qwen2.5-Math-7B",
        train_file=Path("/data/train.parquet"),
        val_file=Path("/data/val.parquet"),
        output_dir=Path("/ckpt"),
        settings_file=Path("/ckpt/ttrl_settings.json"),
        extra=extra,
        nnodes=nnodes,
        gpus_per_node=8 if nnodes else None,
    )


def test_paper_configuration_loads_and_validates_in_verl():
    config = compose(_overrides(TTRLSettings.from_options({})))
    validate(config)
    rollout, actor = config.actor_rollout_ref.rollout, config.actor_rollout_ref.actor
    assert (rollout.n, rollout.temperature, config.trainer.n_gpus_per_node) == (32, 1.0, 8)
    assert (actor.optim.lr, actor.kl_loss_coef, actor.use_kl_loss) == (5e-7, 0.001, True)
    assert config.reward.custom_reward_function.name == "extract_only"
    assert Path(config.reward.custom_reward_function.path).is_file()
    assert config.data.max_response_length == 3072 and config.algorithm.adv_estimator == "grpo"


def test_verl_rejects_a_batch_that_cannot_split_over_the_gpus():
    settings = TTRLSettings.from_options({"prompts_per_step": "1", "n_vote": "3", "n_train": "3"})
    with pytest.raises((AssertionError, ValueError)):
        validate(compose(_overrides(settings)))


def test_entry_point_composes_verl_config_with_the_ttrl_block(tmp_path):
    import subprocess
    import sys

    overrides = _overrides(TTRLSettings.from_options({}))
    shown = subprocess.run(
        [sys.executable, "-m", "testtime.methods.ttrl.verl.trainer", *overrides, "--cfg", "job"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "ttrl:\n  settings_file: /ckpt/ttrl_settings.json" in shown.stdout
    assert "name: extract_only" in shown.stdout


def test_cli_writes_data_config_and_launcher_and_reports_rejections(testtime_cli, tmp_path):
    out = tmp_path / "verl"
    done = testtime_cli("ttrl", "verl", "--model", "/models/m", "--bench", "arith", "--out", str(out), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    overrides = (out / "overrides.txt").read_text().splitlines()
    assert "actor_rollout_ref.rollout.n=32" in overrides and "trainer.n_gpus_per_node=8" in overrides
    notes = (out / "NOTES.txt").read_text()
    assert "64 voted, 32 trained" in notes and "64 voted, 32 trained" in done.stdout
    assert "1 node(s) × 8 GPU(s)" in notes and (out / "submit.sh").is_file()
    assert (out / "data" / "train.parquet").is_file() and "testtime.methods.ttrl.verl.trainer" in (
        out / "launch.sh"
    ).read_text()
    bad = testtime_cli(
        "ttrl", "verl", "--model", "/m", "--bench", "arith", "--out", str(tmp_path / "bad"), "--n-train", "3",
        "--method-opt", "prompts_per_step=1", timeout=300,
    )  # fmt: skip
    assert bad.returncode == 2 and "verl rejects this configuration" in bad.stderr and "Traceback" not in bad.stderr


def test_cli_uses_the_papers_schedule_for_aime(testtime_cli, tmp_path, shared_data):
    out = tmp_path / "aime"
    done = testtime_cli(
        "ttrl", "verl", "--model", "/models/m", "--bench", "aime24", "--data-dir", str(shared_data), "--out", str(out),
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    overrides = (out / "overrides.txt").read_text().splitlines()
    assert "trainer.total_epochs=80" in overrides and "data.train_batch_size=8" in overrides
    assert "avg@16 at T=0.6, top-p 0.95, 3,072 tokens" in done.stdout and "evaluate.sh" in done.stdout


def test_the_evaluation_joins_verls_recorded_training_at_its_compute(
    testtime_cli, tmp_path, shared_data, scripted_model
):
    """evaluate.sh merges a checkpoint with verl's merger, then runs TTRL's evaluation (16 samples at T=0.6, top-p
    0.95, 3,072 tokens, before and after) as `run --method ttrl` joined to the training verl recorded: the
    recorded rollouts and training steps up to the evaluated step count in its compute, its votes are audited,
    nothing trains here, and a resume joins nothing twice."""
    from testtime.benchmarks import benchmark_for
    from testtime.core.ledger import read_entries
    from testtime.core.results import TTRLVote
    from testtime.methods.ttrl.verl.record import Row, StepRecorder

    base, out = scripted_model.removeprefix("hf:"), (tmp_path / "aime").resolve()
    done = testtime_cli(
        "ttrl", "verl", "--model", base, "--bench", "aime24", "--data-dir", str(shared_data), "--limit", "2",
        "--out", str(out), timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"+ttrl.record_dir={out}" in (out / "overrides.txt").read_text().splitlines()
    lines = (out / "evaluate.sh").read_text().splitlines()
    merge = next(line for line in lines if "verl.model_merger merge --backend fsdp" in line)
    assert "latest_checkpointed_iteration.txt" in "\n".join(lines) and "global_step_$step/actor" in merge

    # what launch.sh's training would have recorded: 3 steps, 2 trained + 1 vote-only response per problem
    ids = [p.id for p in benchmark_for("aime24", str(shared_data), {}, 2).load()[0]][:2]
    recorder = StepRecorder(out, model=scripted_model)
    for step in (1, 2, 3):
        votes = [TTRLVote(problem_id=i, label="1", majority_ratio=2 / 3, kept=(0, 1), rewards=(1.0, 0.0)) for i in ids]
        recorder.record(step, votes, [Row(i, 50, 10) for i in ids for _ in (0, 1)], [Row(i, 50, 7) for i in ids])
    shutil.copytree(base, out / "merged" / "global_step_2")  # the step-2 weights, as the merger leaves them

    evaluate = shlex.split(next(line for line in lines if "testtime.cli run" in line))
    evaluate = [arg.replace("$step", "2") for arg in evaluate[evaluate.index("run") :]]
    ran = testtime_cli(*evaluate, "--quiet", timeout=600)
    assert ran.returncode == 0, ran.stderr[-2000:]
    run = RunDir(out / "eval" / "global_step_2")
    manifest, summary = run.read_manifest(), run.read_summary()
    assert manifest.run.method == "ttrl" and manifest.method["backend"] == "verl"
    assert manifest.effective is not None and manifest.effective.n == 16
    sampling = manifest.effective.sampling["eval_after"]
    assert (sampling.temperature, sampling.top_p, sampling.max_tokens) == (0.6, 0.95, 3072)
    assert summary is not None and summary.ttrl is not None and summary.ttrl.compute is not None
    assert summary.ttrl.compute.rollout_tokens == 2 * 2 * (2 * 60 + 57)  # steps 1 and 2 of 3, two problems
    assert summary.ttrl.compute.train_tokens == 2 * 2 * 2 * 60
    assert not (run.path / "ttrl" / "checkpoints").exists()  # trained on verl, not here
    assert all(len(r.ttrl.votes) == 2 for r in run.read_results() if r.ttrl)  # each step's vote, for the audit
    joined = len(read_entries(run.ledger_path))
    again = testtime_cli("run", "--resume", str(run.path), "--quiet", timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    rollouts = [e for e in read_entries(run.ledger_path) if e.purpose in ("ttrl_rollout", "ttrl_vote")]
    assert len(rollouts) == 2 * 2 * 3 and len(read_entries(run.ledger_path)) >= joined


def test_verl_reads_the_same_typed_settings_and_accepts_code(testtime_cli, tmp_path):
    """The trainer's vote reads every TTRL setting from the file the command writes (selector options
    included, not only tie_policy), and a code benchmark is prepared like a math one."""
    out = tmp_path / "code"
    done = testtime_cli(
        "ttrl", "verl", "--model", "/models/m", "--bench", "pyfunc", "--bench-opt", "size=8", "--out", str(out),
        "--method-opt", "prompts_per_step=8", "--method-opt", "test_inputs=3", "--method-opt", "timeout_s=1",
        "--method-opt", "min_majority_ratio=0.25", timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    settings = TTRLSettings.model_validate_json((out / "ttrl_settings.json").read_text())
    assert settings.selector == "execution" and settings.selector_options == {"test_inputs": "3", "timeout_s": "1"}
    assert settings.min_majority_ratio == 0.25
    overrides = (out / "overrides.txt").read_text().splitlines()
    assert f"+ttrl.settings_file={(out / 'ttrl_settings.json').resolve()}" in overrides

    from testtime.methods.ttrl.verl.trainer import settings_from_config

    read = settings_from_config({"ttrl": {"settings_file": str(out / "ttrl_settings.json")}})
    selector = read.build("code")
    assert selector.name == "execution" and selector.options.test_inputs == 3 and selector.options.timeout_s == 1


@pytest.mark.parametrize(("reward", "why"), [("oracle", "not yet on verl"), ("self_certainty", "token distribution")])
def test_rewards_verl_cannot_serve_are_refused_before_anything_is_written(reward, why):
    from testtime.core.errors import UserError

    with pytest.raises(UserError, match=why):
        _overrides(TTRLSettings.from_options({"reward": reward}))
    assert _overrides(TTRLSettings.from_options({"reward": "novelty"}))  # novelty votes as majority does
