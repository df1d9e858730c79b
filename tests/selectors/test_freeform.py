"""The free-form selectors on constructed replies: the medoid picks the reply most like the others, universal
self-consistency asks the model once (its own ledger purpose) and falls back to the medoid when the
judgement names no reply, and both imply a confidence."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from testtime.core.cache import CompletionCache
from testtime.core.ledger import Ledger, read_entries
from testtime.core.records import Candidate, Message, Problem, SamplingParams
from testtime.core.rollout import RolloutEngine
from testtime.core.selection import ConsistencyEvidence, Selection, SimilarityEvidence
from testtime.models.fake import FakeModel
from testtime.selectors import SelectionContext, build_selector

PROBLEM = Problem(id="q", domain="text", statement="Summarise: the meeting moved to Friday at noon.")
REPLIES = [
    "The meeting is now on Friday at noon.",  # 0: the consensus said in full: it shares words with 2 and with 3
    "Lunch was cancelled.",  # 1: an outlier
    "The meeting moved to Friday, at noon.",  # 2
    "Meeting now Friday noon.",  # 3
    None,  # 4: no reply (a failed call)
]


def candidates(replies: Sequence[str | None]) -> list[Candidate]:
    return [
        Candidate(index=i, text=r or "", answer=r, error=None if r is not None else "HTTP 500")
        for i, r in enumerate(replies)
    ]


def run(name: str, judge: str | None = None, ledger: Ledger | None = None) -> tuple[Selection, Ledger, list[str]]:
    ledger, prompts = ledger or Ledger(), []

    def script(messages: Sequence[Message], params: SamplingParams) -> str:
        prompts.append(messages[-1].content)
        return judge or ""

    engine = RolloutEngine(FakeModel(script), model_name="fake:", cache=CompletionCache(None), ledger=ledger)
    ctx = SelectionContext(seed=1, engine=engine, params=SamplingParams(), step=3)
    return asyncio.run(build_selector(name).select(PROBLEM, candidates(REPLIES), ctx)), ledger, prompts


def test_the_medoid_is_the_reply_most_like_the_others() -> None:
    selection, ledger, _ = run("medoid")
    assert selection.index == 0 and selection.answer == REPLIES[0]
    assert ledger.totals.calls == 0  # no call: the texts alone decide
    assert isinstance(selection.evidence, SimilarityEvidence)
    means = selection.evidence.mean_similarity
    assert means[4] is None and means[1] == 0.0  # the outlier shares no word with any other reply
    assert means[0] is not None and means[0] > max(m for m in means[1:4] if m is not None)
    assert selection.class_of(4) is None  # no reply abstains
    # its confidence: the mean similarity to the 4 other candidates (the failed one counts 0)
    assert selection.evidence.confidence == pytest.approx(means[0], abs=1e-6) and 0.0 < means[0] < 1.0


def test_identical_replies_form_one_class_and_win_a_tie() -> None:
    selection = asyncio.run(
        build_selector("medoid").select(PROBLEM, candidates(["Yes.", "No", "yes", "Maybe"]), SelectionContext())
    )
    assert selection.index == 0 and selection.cluster_sizes == (2, 1, 1) and selection.majority_ratio == 0.5


def test_usc_asks_once_shows_every_reply_and_takes_the_named_one(tmp_path: Path) -> None:
    judge = "The most consistent response is Response 3, because it agrees."
    selection, ledger, prompts = run("usc", judge, Ledger(tmp_path / "ledger.jsonl"))
    [prompt] = prompts
    assert "Response 0: The meeting is now on Friday at noon." in prompt and "Response 3: Meeting now" in prompt
    assert "Response 4" not in prompt  # the failed call is not shown
    assert selection.selector == "usc" and selection.index == 3
    assert isinstance(selection.evidence, ConsistencyEvidence)
    assert selection.evidence.picked == 3 and selection.evidence.fallback is None
    assert selection.evidence.shown == (0, 1, 2, 3)
    ledger.close()
    [entry] = read_entries(tmp_path / "ledger.jsonl")
    assert entry.purpose == "consistency" and entry.step == 3 and ledger.totals.calls == 1


def test_usc_falls_back_to_the_medoid_when_the_judgement_names_no_reply() -> None:
    for judge in ("I cannot decide.", "The most consistent response is Response 9."):
        selection, _, _ = run("usc", judge)
        assert isinstance(selection.evidence, ConsistencyEvidence)
        assert selection.index == 0 and selection.evidence.picked is None  # the medoid's choice
        assert selection.evidence.fallback is not None and "medoid" in selection.evidence.fallback


def test_one_reply_is_its_own_choice_without_a_call_or_a_confidence() -> None:
    ledger = Ledger()
    engine = RolloutEngine(FakeModel(), model_name="fake:", cache=CompletionCache(None), ledger=ledger)
    one = candidates(["Friday at noon."])
    for name in ("medoid", "usc"):
        selection = asyncio.run(build_selector(name).select(PROBLEM, one, SelectionContext(engine=engine)))
        assert selection.index == 0 and selection.evidence is not None
        assert selection.evidence.confidence is None  # type: ignore[union-attr]
    assert ledger.totals.calls == 0
