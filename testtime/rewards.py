"""testtime's label-free rewards as TRL reward functions, for a `GRPOTrainer` of your own:

    from trl import GRPOConfig, GRPOTrainer
    from testtime.rewards import majority_reward

    trainer = GRPOTrainer(model=..., reward_funcs=[majority_reward], train_dataset=ds,
                          args=GRPOConfig(num_generations=8, ...))

TRL calls a reward function with `prompts`, `completions` (text, or conversational message lists) and every
other dataset column as keywords, each prompt's `num_generations` completions consecutive. Each function
here groups the completions by prompt, votes within each group with the selection core (math: the largest
class of equivalent answers, as TTRL; free-form text: the medoid reply) and returns one reward per
completion from the registered reward of the same name (`testtime/methods/ttrl/rewards.py`): `majority`
(TTRL), `novelty` (EVOL-RL), `format` and `random` (controls). No label is read.

`reward_function(name, domain=..., selector=...)` builds one with other settings; a plugin's reward (an
entry in `REWARDS`) works too. Rewards that need the policy's token distribution (`self_certainty`,
`entropy`), the labels (`oracle`) or a sandbox (code) are refused here: testtime's own TTRL supplies those.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Sequence
from typing import Any

from testtime.core.asyncs import off_loop
from testtime.core.calls import Calls
from testtime.core.errors import UserError
from testtime.core.records import Problem, SamplingParams
from testtime.core.rollout import RolloutEngine
from testtime.methods.ttrl.rewards import REWARDS, TrainedReward
from testtime.methods.ttrl.trl_reward import completion_text
from testtime.methods.ttrl.vote import VotePolicy, vote
from testtime.selectors import DEFAULTS, SelectionContext, build_selector

__all__ = ["format_reward", "majority_reward", "novelty_reward", "random_reward", "reward_function"]

NOT_HERE = {
    "self_certainty": "needs the policy's token distribution for each completion",
    "entropy": "needs the policy's token distribution for each completion",
    "oracle": "reads the labels",
}


class GroupReward:
    """One registered reward over TRL's batch, grouped by prompt. Keeps state across calls (the `random`
    control's running mean of the majority reward), as a trainer's reward function may."""

    def __init__(
        self,
        name: str,
        domain: str = "math",
        selector: str | None = None,
        selector_options: dict[str, Any] | None = None,
        seed: int = 0,
        random_p: float | None = None,
        judge: str | None = None,
    ) -> None:
        from testtime.core.plugins import load_plugins

        load_plugins()
        if name in NOT_HERE:
            raise UserError(f"reward {name} {NOT_HERE[name]}: use testtime's TTRL (`--method ttrl`) for it")
        if domain not in ("math", "text"):
            raise UserError(
                f"domain {domain}: TRL rewards here vote on math answers or free-form text (code needs a sandbox)"
            )
        REWARDS.get(name)  # an unknown name fails now, naming what exists
        self.name, self.domain, self.seed = name, domain, seed
        self.selector = build_selector(selector or DEFAULTS[domain], selector_options)
        self.reward = TrainedReward(name, random_p, seed)
        self.rng = random.Random(f"trl-vote-{seed}")
        self.judge = _judge_engine(judge) if judge else None  # text: the model that says which replies agree
        # TRL logs each reward function under its __name__: one per distinct reward, its settings in the name
        chosen = [domain if domain != "math" else "", selector or "", f"seed{seed}" if seed else ""]
        chosen.append("judged" if judge else "")
        chosen.append(f"p{random_p:g}" if random_p is not None else "")
        self.__name__ = "_".join(["testtime", name, *filter(None, chosen)])

    def __call__(self, completions: Sequence[Any], prompts: Sequence[Any] | None = None, **_: Any) -> list[float]:
        texts = [completion_text(c) for c in completions]
        keys = [_key(p) for p in prompts] if prompts is not None else [""] * len(texts)
        if len(keys) != len(texts):
            raise ValueError(f"{len(texts)} completions but {len(keys)} prompts")
        groups: list[tuple[int, int]] = []  # consecutive runs of one prompt: GRPO's groups
        for i, key in enumerate(keys):
            if groups and keys[groups[-1][0]] == key:
                groups[-1] = (groups[-1][0], i + 1)
            else:
                groups.append((i, i + 1))
        votes = off_loop(lambda: asyncio.run(self._votes(texts, keys, groups)))
        return [r for rewards in self.reward.rewards(votes) for r in rewards]

    async def _votes(self, texts: list[str], keys: list[str], groups: list[tuple[int, int]]) -> list[Any]:
        policy = VotePolicy()
        found = []
        for g, (start, end) in enumerate(groups):
            problem = Problem(id=f"group-{g}", domain=self.domain, statement=keys[start])  # type: ignore[arg-type]
            greedy = {"consistency": SamplingParams(temperature=0.0)}
            judge = None if self.judge is None else Calls(self.judge, greedy, problem.id)
            ctx = SelectionContext(seed=self.seed, calls=judge)
            found.append(await vote(problem, texts[start:end], self.selector, ctx, policy, self.rng))
        return found


def _judge_engine(spec: str) -> RolloutEngine:
    """The model that judges which free-form replies agree (one greedy call per group)."""
    from testtime.models import resolve_model

    return RolloutEngine.in_memory(resolve_model(spec), spec)


def reward_function(name: str, **settings: Any) -> GroupReward:
    """A TRL reward function from a registered reward (`majority`, `novelty`, `format`, `random`, a plugin's);
    `settings`: domain ("math" | "text"), selector, selector_options, seed, random_p, and `judge` (a model spec:
    on text, the model that groups the replies that give the same answer; without one, identical replies form
    the classes, and the evidence says so)."""
    return GroupReward(name, **settings)


def _key(prompt: Any) -> str:
    return prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True, default=str)


majority_reward = GroupReward("majority")
novelty_reward = GroupReward("novelty")
format_reward = GroupReward("format")
random_reward = GroupReward("random")
