"""The knowledge list: caps, pruning, near-duplicates, deactivation, rendering."""

from __future__ import annotations

from testtime.knowledge import KnowledgeList


def test_cap_drops_the_oldest_first() -> None:
    knowledge = KnowledgeList(max_items=3)
    for i in range(5):
        knowledge.add(f"lesson number {i} about topic {i * 7}", round_=i)
    assert [item.text for item in knowledge.active()] == [f"lesson number {i} about topic {i * 7}" for i in (2, 3, 4)]
    assert len(knowledge.items) == 5  # history is kept, inactive


def test_near_duplicates_merge() -> None:
    knowledge = KnowledgeList()
    knowledge.add("Do not forget to handle n = 0.", round_=1)
    assert knowledge.add("do not forget to handle n = 0", round_=2) is None
    assert len(knowledge.active()) == 1 and knowledge.active()[0].round == 2


def test_token_budget_prunes() -> None:
    knowledge = KnowledgeList(max_items=10, max_tokens=30)
    knowledge.add("a" * 80, round_=1)
    knowledge.add("b" * 80, round_=2)
    assert [item.text[0] for item in knowledge.active()] == ["b"]


def test_math_keeps_at_most_n_reasons_per_rejected_answer() -> None:
    knowledge = KnowledgeList(reasons_per_answer=2)
    for reason in ("it ignores the carry", "the sum of units digits is wrong", "it drops the last term entirely"):
        knowledge.add(f"The answer is not 5: {reason}", round_=1, source="refutation", rejected_answer="5")
    knowledge.add("The answer is not 9: it double counts", round_=1, source="refutation", rejected_answer="9")
    reasons_for_5 = [i for i in knowledge.active() if i.rejected_answer == "5"]
    assert len(reasons_for_5) == 2 and "carry" not in reasons_for_5[0].text


def test_deactivate_by_id_and_render() -> None:
    knowledge = KnowledgeList()
    first = knowledge.add("check the constraints on n", round_=1)
    knowledge.add("use 64-bit arithmetic", round_=1, kind="do")
    assert first is not None and knowledge.deactivate(first.id)
    assert not knowledge.deactivate(first.id)  # once only
    assert knowledge.render() == "[2] Do: use 64-bit arithmetic"
    assert knowledge.tokens() > 0
