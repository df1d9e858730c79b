"""Warnings about what a run measured: said at the start where the settings already show it, and kept in the
summary (`warnings`) so that a reader of the numbers sees them too.

- Greedy sampling with more than one sample: every sample is the same, so a vote or a medoid over them is
  one sample paid N times (a client's temperature-0 default, as lm-eval sends, does this to a served majority).
- Nothing measured: every sample cut at max_tokens, or no sample gave an answer of the problem's kind.
"""

from __future__ import annotations

from collections.abc import Sequence

from testtime.core.records import SamplingParams
from testtime.core.results import ResultRecord
from testtime.evaluation.summary import KnowledgeHealth, LabelFreeSummary

ALL_CUT = "every sample was cut at max_tokens before it ended"


def token_flag(method: str) -> str:
    """The flag that raises a sample's token cap: TTRL's rollouts and answers take theirs from its own option
    (it refuses --max-tokens)."""
    return "--method-opt max_response=N" if method == "ttrl" else "--max-tokens"


def greedy_samples(sampling: dict[str, SamplingParams], samples: int | None, calls: int | None = None) -> str | None:
    """The warning for a plan that draws several solver samples at temperature 0, else None: `samples` of one
    prompt (majority, TTRL's evaluation), or, for a method whose solver calls are not a fixed number of samples
    (TRT's rounds, RSA's population), its `calls` per problem."""
    solve = sampling.get("solve")
    if solve is None or solve.temperature != 0:
        return None
    if samples is not None and samples >= 2:
        return (
            f"{samples} samples per problem at temperature 0 are {samples} copies of one answer: the selection "
            "among them measures nothing (sample with --temperature > 0, or use --method single)"
        )
    if samples is None and calls is not None and calls >= 2:
        return (
            f"{calls} model calls per problem with the solver at temperature 0: each prompt has one answer, so "
            "rollouts of one prompt are copies and the selection among them measures little (sample with "
            "--temperature > 0)"
        )
    return None


def plan_warnings(sampling: dict[str, SamplingParams], samples: int | None, calls: int | None = None) -> list[str]:
    """What a run's plan (its sampling per kind of call, its samples or calls per problem) shows before the first
    call."""
    greedy = greedy_samples(sampling, samples, calls)
    return [greedy] if greedy else []


def measured_nothing(records: Sequence[ResultRecord], method: str = "") -> list[str]:
    """Warnings for a run whose samples carried nothing to select or grade, naming the likely fix."""
    samples = [c for r in records for c in r.candidates if not c.error]
    if not samples:
        return []
    warnings = []
    if all(c.finish_reason == "length" for c in samples):
        warnings.append(f"{ALL_CUT}: raise {token_flag(method)} (reasoning models need thousands of tokens)")
    if all(c.answer is None for c in samples):
        warnings.append(
            "no sample gave an answer (math looks for a final \\boxed{}, code for a ```python block): a small model "
            "boxes when shown how: --bench-opt template=FILE with one worked example ending in \\boxed{...} and "
            "{problem} (docs/own-data.md), or grade free-form replies with --bench-opt domain=text"
        )
    return warnings


def judge_fell_back(label_free: LabelFreeSummary | None) -> list[str]:
    """The warning for a free-form run whose judge could not judge (the summary's counts): those answers were
    chosen, and their confidence measured, by word overlap, which ranks four contradicting templated replies above
    four paraphrases of one answer. Silent once (the embedded model as judge fell back on 6 of 6 problems)."""
    if label_free is None or not label_free.judge_fell_back:
        return []
    grouping = label_free.judge_grouping_fell_back or 0
    chosen, judged = label_free.judge_fell_back - grouping, label_free.judged
    said = []
    if chosen:
        said.append(
            f"{chosen} of {judged} judged selections fell back to word overlap (the judge named no reply or group): "
            "their answers were chosen, and their confidence measured, by shared words"
        )
    if grouping:
        said.append(
            f"{grouping} of {judged} judged selections kept the judge's choice but not its grouping (it named no "
            "classes): their confidence, not their answer, was measured by shared words"
        )
    return [
        "; ".join(said) + " (predictions.jsonl's confidence_basis says which); use a stronger judge model, or "
        "--selector-opt agreement=words to choose by words from the start"
    ]


def knowledge_stayed_empty(health: KnowledgeHealth | None, method: str) -> list[str]:
    """The warning for a run whose TRT knowledge list never held a lesson: what ran was rounds of rollouts and
    selection (TTRL: its training without the lessons), not what the method is named for, and the figures should
    say so."""
    if health is None or health.lessons_entered != 0:
        return []
    what = (
        "TTRL's training without them (knowledge=trt changed nothing but the reflections' tokens)"
        if method == "ttrl"
        else "rounds of rollouts with selection, not TRT's recursive thinking"
    )
    return [
        f"TRT's knowledge list stayed empty: no lesson entered it on any problem ({health.reflections_parsed} of "
        f"{health.reflections} reflections parsed, {health.strategy_lists_parsed} of {health.strategy_lists} "
        f"strategy lists); what ran is {what} (a model too small to write the JSON the prompts ask for, or "
        "--max-tokens too low for it)"
    ]
