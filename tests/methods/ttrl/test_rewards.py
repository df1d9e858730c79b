"""TTRL's rewards: each has the values or statistics it is meant to have on constructed groups, none but
`oracle` can read a label, and `oracle` reads them only through the channel the runner opens for it.

`random` is Bernoulli(p) whatever the sample says (p: set, or the majority reward's running mean); `format`
rewards a well-formed answer whatever its value; `majority` is the vote's own reward. A label that TRL passes
along as a dataset column changes nothing.
"""

from __future__ import annotations

from pathlib import Path
from statistics import mean
from types import SimpleNamespace

import pytest

from testtime.core.errors import UserError
from testtime.core.ledger import Ledger
from testtime.core.records import Problem, TokenStats
from testtime.core.results import TTRLVote
from testtime.methods.ttrl.recipe import TTRLSettings
from testtime.methods.ttrl.rewards import REWARDS, TrainedReward
from testtime.methods.ttrl.trl_reward import StepBuffer, VoteReward
from testtime.selectors import SelectionContext, build_selector

PROBLEMS = {f"p{i}": Problem(id=f"p{i}", domain="math", statement=f"question {i}") for i in range(4)}


def _vote(majority: list[float], abstained: frozenset[int] = frozenset()) -> TTRLVote:
    answers = tuple(None if i in abstained else "3" for i in range(len(majority)))
    return TTRLVote(
        problem_id="p0",
        label="3",
        label_key="3",
        majority_ratio=0.5,
        no_answer_rate=len(abstained) / len(majority),
        kept=tuple(range(len(majority))),
        rewards=tuple(majority),
        answers=answers,
        votes=answers,
        abstained=abstained,
    )


def test_random_rewards_are_bernoulli_p_and_blind_to_agreement() -> None:
    trained = TrainedReward("random", random_p=0.3, seed=1)
    agreeing, disagreeing = [], []
    for _ in range(500):
        [rewards] = trained.rewards([_vote([1.0, 1.0, 0.0, 0.0])])
        agreeing += rewards[:2]
        disagreeing += rewards[2:]
    assert mean(agreeing + disagreeing) == pytest.approx(0.3, abs=0.03)  # 2,000 draws: 3 sd ≈ 0.031
    assert abs(mean(agreeing) - mean(disagreeing)) < 0.07  # the vote's verdict does not move it


def test_random_p_defaults_to_the_majority_rewards_running_mean() -> None:
    trained = TrainedReward("random", seed=0)
    trained.rewards([_vote([1.0, 0.0, 0.0, 0.0])])
    assert trained.p() == pytest.approx(0.25)
    trained.rewards([_vote([1.0, 1.0, 1.0, 1.0]), _vote([1.0, 1.0, 0.0, 1.0])])
    assert trained.p() == pytest.approx(8 / 12)
    draws = [r for _ in range(600) for r in trained.rewards([_vote([0.5] * 4)])[0]]
    assert mean(draws) == pytest.approx(0.5, abs=0.04)  # the running mean has drifted to 0.5 by then


def test_format_rewards_a_well_formed_answer_whatever_its_value() -> None:
    [rewards] = TrainedReward("format").rewards([_vote([1.0, 0.0, 0.0, 1.0], abstained=frozenset({2}))])
    assert rewards == [1.0, 1.0, 0.0, 1.0]  # the wrong-but-formed sample 1 earns what the right one does


def test_majority_is_the_votes_own_reward() -> None:
    assert TrainedReward("majority").rewards([_vote([1.0, 0.0, 1.0, 0.0])]) == [[1.0, 0.0, 1.0, 0.0]]


def test_an_unknown_reward_is_a_clear_error() -> None:
    with pytest.raises(
        UserError, match="unknown ttrl reward 'truth'; available: entropy, format, majority, matrix, novelty"
    ):
        TrainedReward("truth")
    assert REWARDS.builtin_names() == [
        "entropy", "format", "majority", "matrix", "novelty", "novelty_lexical", "oracle", "random", "self_certainty"
    ]  # fmt: skip


def _reward_function(tmp_path: Path, reward: str) -> tuple[VoteReward, StepBuffer]:
    settings = TTRLSettings.from_options({"preset": "cpu", "n_vote": 4, "n_train": 4, "reward": reward})
    selector = build_selector("majority")
    function = VoteReward(settings, PROBLEMS, selector, lambda _: SelectionContext(), ledger=Ledger(), model_name="m")
    return function, function.buffer


def _batch(label_column: list[str]) -> dict[str, list]:
    texts = ["\\boxed{3}", "\\boxed{3}", "\\boxed{4}", "no answer"]
    prompts, completions, ids, pids = [], [], [], []
    for pid in PROBLEMS:
        for text in texts:
            prompts.append([{"role": "user", "content": pid}])
            completions.append([{"role": "assistant", "content": text}])
            ids.append([1, 2, 3])
            pids.append(pid)
    # TRL passes every dataset column to reward functions: a label column must change nothing.
    return {
        "prompts": prompts,
        "completions": completions,
        "completion_ids": ids,
        "problem_id": pids,
        "answer": label_column * (len(pids) // len(label_column)),
    }


@pytest.mark.parametrize("reward", ["majority", "novelty", "random", "format"])
def test_no_reward_reads_a_label_passed_along(tmp_path: Path, reward: str) -> None:
    seen = []
    for labels in (["3"], ["4"], ["no such answer"]):
        function, _ = _reward_function(tmp_path, reward)
        seen.append(function(**_batch(labels), trainer_state=SimpleNamespace(global_step=0)))
    assert seen[0] == seen[1] == seen[2]


def test_a_control_run_logs_what_it_trained_on_beside_the_vote(tmp_path: Path) -> None:
    function, log = _reward_function(tmp_path, "format")
    rewards = function(**_batch(["3"]), trainer_state=SimpleNamespace(global_step=0))
    assert rewards[:4] == [1.0, 1.0, 1.0, 0.0]  # "4" is wrong by the vote, yet well formed
    first = log.votes[0]
    assert first.rewards == (1.0, 1.0, 1.0, 0.0) and first.majority_rewards == (1.0, 1.0, 0.0, 0.0)
    assert log.stats["train_reward"] == pytest.approx(0.75) and log.stats["pseudo_reward"] == pytest.approx(0.5)


def test_a_control_trains_on_the_same_samples_and_labels_as_ttrl(tmp_path: Path) -> None:
    # The vote's downsampling and tie-breaks draw from the run's RNG; a control draws from its own, so
    # switching reward=majority to reward=random keeps which samples are trained and what the label is.
    pending = {}
    for reward in ("majority", "random"):
        settings = TTRLSettings.from_options(
            {"preset": "cpu", "n_vote": 4, "n_train": 2, "downsample": "random", "reward": reward}
        )
        selector = build_selector("majority", {"tie_policy": "random"})
        function = VoteReward(
            settings, PROBLEMS, selector, lambda _: SelectionContext(), ledger=Ledger(), model_name="m", seed=7
        )
        log = function.buffer
        function.extra_votes = lambda prompts, k: [[("\\boxed{5}", 3), ("\\boxed{6}", 3)] for _ in prompts]
        batch = _batch(["3"])
        trained = {k: [v for i, v in enumerate(values) if i % 4 in (0, 2)] for k, values in batch.items()}
        function(**trained, trainer_state=None)  # votes 3, 4, 5, 6: a four-way tie, broken at random
        pending[reward] = [(v.label, v.answers) for v in log.votes]
    assert pending["majority"] == pending["random"]


def test_novelty_keeps_agreement_first_and_ranks_novelty_within_each_side() -> None:
    vote = _vote([1.0, 1.0, 1.0, 0.0, 0.0]).model_copy(
        update={
            "texts": (
                "add seven and five to get twelve",  # the majority's most common wording
                "add seven and five to get twelve",
                "count up from seven by five steps: twelve",  # the majority's novel one
                "it is thirteen",
                "seven plus five is thirteen i think",
            )
        }
    )
    [rewards] = TrainedReward("novelty_lexical").rewards([vote])
    assert rewards[0] == rewards[1] == pytest.approx(0.5) and rewards[2] == pytest.approx(1.0)
    assert min(rewards[:3]) > max(rewards[3:])  # any agreeing sample outranks any other
    assert all(-1.0 <= r <= -0.5 for r in rewards[3:])  # the minority's range


def test_novelty_gives_a_sample_without_an_answer_a_flat_minus_one() -> None:
    """EVOL-RL: no answer is the floor, never above a wrong answer (it earned up to −0.5 for being novel)."""
    vote = _vote([1.0, 1.0, 0.0, 0.0, 0.0], abstained=frozenset({4})).model_copy(
        update={"texts": ("twelve", "it is twelve", "thirteen", "it is fourteen", "a wholly new rambling text")}
    )
    [rewards] = TrainedReward("novelty_lexical").rewards([vote])
    assert rewards[4] == -1.0 and min(rewards[2:4]) == pytest.approx(-1.0) and max(rewards[2:4]) == pytest.approx(-0.5)
    assert min(rewards[:2]) >= 0.5


def test_novelty_mixes_the_side_mean_with_the_global_max() -> None:
    """A majority sample that copies a minority one word for word is not novel, whatever its own side says."""
    vote = _vote([1.0, 1.0, 1.0, 0.0]).model_copy(
        update={"texts": ("a b c", "a b d", "x y z", "x y z")}  # the third is the minority's copy
    )
    [rewards] = TrainedReward("novelty_lexical").rewards([vote])
    # side means 0.25, 0.25, 0 (the copy is the most novel within its side); global maxima 0.5, 0.5, 1 (a copy):
    # u = 1 − (0.5·mean + 0.5·max) = 0.625, 0.625, 0.5, so the copy is the majority's least novel
    assert rewards[:3] == pytest.approx([1.0, 1.0, 0.5])


def test_novelty_of_a_side_without_spread_is_the_midpoint() -> None:
    vote = _vote([1.0, 1.0]).model_copy(update={"texts": ("same words", "same words")})
    assert TrainedReward("novelty_lexical").rewards([vote]) == [[0.75, 0.75]]


def test_oracle_rewards_what_the_labels_grade_correct() -> None:
    from testtime.core.oracle import LabelOracle

    asked = []

    def correct(problem_id: str, answer: str | None) -> bool:
        asked.append((problem_id, answer))
        return answer == "3"

    vote = _vote([1.0, 1.0, 0.0]).model_copy(update={"answers": ("3", "4", None)})
    trained = TrainedReward("oracle", oracle=LabelOracle(correct=correct))
    assert trained.apply([vote])[0].rewards == (1.0, 0.0, 0.0)
    assert asked == [("p0", "3"), ("p0", "4"), ("p0", None)]
    assert trained.apply([vote])[0].majority_rewards == (1.0, 1.0, 0.0)  # what the vote would have given


def test_oracle_without_its_channel_fails_loudly() -> None:
    with pytest.raises(RuntimeError, match="label channel"):
        TrainedReward("oracle").rewards([_vote([1.0, 0.0])])


def _stats(*values: tuple[float, float]) -> tuple[TokenStats, ...]:
    return tuple(TokenStats(tokens=5, entropy_mean=h, self_certainty=c) for h, c in values)


def test_confidence_rewards_read_each_samples_token_statistics() -> None:
    vote = _vote([1.0, 0.0, 0.0]).model_copy(update={"token_stats": _stats((0.5, 3.0), (2.0, 1.0), (1.0, 2.5))})
    assert TrainedReward("self_certainty").rewards([vote]) == [[3.0, 1.0, 2.5]]  # blind to the vote
    assert TrainedReward("entropy").rewards([vote]) == [[-0.5, -2.0, -1.0]]
    with pytest.raises(RuntimeError, match="token statistics"):
        TrainedReward("entropy").rewards([_vote([1.0, 0.0])])


def test_the_reward_step_hands_each_group_its_rows_statistics(tmp_path: Path) -> None:
    function, log = _reward_function(tmp_path, "self_certainty")
    batch = _batch(["3"])
    stats = [TokenStats(tokens=3, entropy_mean=0.1, self_certainty=float(i)) for i in range(len(batch["prompts"]))]
    rewards = function(**batch, token_stats=stats, trainer_state=SimpleNamespace(global_step=0))
    assert rewards == [float(i) for i in range(16)]  # row i's own statistic, in TRL's row order
    assert log.votes[1].majority_rewards == (1.0, 1.0, 0.0, 0.0)  # the vote is still computed and logged


def test_confidence_rewards_are_refused_on_vllm_rollouts() -> None:
    with pytest.raises(UserError, match="use_vllm=false"):
        TTRLSettings.from_options({"reward": "entropy", "use_vllm": "true"})


def test_novelty_compares_by_embeddings_when_given_an_embedder() -> None:
    """EVOL-RL's similarity is an embedding cosine: with one, two samples in different words but one meaning
    are alike (word overlap would call them novel)."""
    from testtime.methods.ttrl.rewards import novelty_lexical_reward, novelty_reward

    meaning = {"twelve it is": [1.0, 0.0], "the sum is 12": [1.0, 0.0], "count the cases: 12": [0.0, 1.0]}
    vote = _vote([1.0, 1.0, 1.0]).model_copy(update={"texts": tuple(meaning)})
    by_words = novelty_lexical_reward(vote=vote)
    by_meaning = novelty_reward(vote=vote, embed=lambda texts: [meaning[t] for t in texts])
    assert by_meaning == pytest.approx([0.5, 0.5, 1.0])  # the two paraphrases are one idea; the third is new
    assert by_words != by_meaning


@pytest.mark.slow
def test_the_embedded_model_embeds_for_novelty() -> None:
    pytest.importorskip("torch")
    from testtime.models.embedding import MeanPooledEmbedder

    embed = MeanPooledEmbedder("smollm2-135m")
    a, b, c = embed(["The answer is twelve.", "The answer is twelve.", "Photosynthesis needs light."])
    cosine = [sum(x * y for x, y in zip(u, v, strict=True)) for u, v in ((a, b), (a, c))]
    assert cosine[0] == pytest.approx(1.0, abs=1e-5) and cosine[1] < cosine[0]
    assert sum(x * x for x in a) == pytest.approx(1.0, abs=1e-5)  # unit vectors: a dot product is the cosine
    assert TrainedReward("novelty").embed is not None  # the embedded model unless another is named
    assert TrainedReward("majority", embedder="smollm2-135m").embed is None  # only novelty reads it
    tail = " The answer is twelve."
    long_a, long_b = "x " * 3000 + tail, "y " * 1500 + "x " * 1500 + tail  # alike in their last 1,024 tokens
    first, second = embed([long_a, long_b])
    assert sum(x * y for x, y in zip(first, second, strict=True)) == pytest.approx(1.0, abs=1e-5)  # the tail read


def test_the_matrix_reward_is_a_samples_score_over_the_best() -> None:
    """reward=matrix (code, rank=matrix): each kept sample's score in the code × test matrix, over the best's; a
    sample with no program earns 0, and a matrix where nothing passes rewards nothing."""
    from testtime.core.results import TTRLVote
    from testtime.methods.ttrl.rewards import matrix_reward

    vote = TTRLVote(problem_id="p", majority_ratio=0.5, kept=(0, 1, 2), scores=(2.0, 1.0, 0.5, 2.0),
                    abstained=frozenset({2}))  # fmt: skip
    assert matrix_reward(vote=vote) == [1.0, 0.5, 0.0]
    assert matrix_reward(vote=vote.model_copy(update={"scores": (0.0, 0.0, 0.0, 0.0)})) == [0.0, 0.0, 0.0]
