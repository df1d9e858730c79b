"""The memory a stream shares across problems (TRT memory=shared): provenance, uses, caps, merging."""

from __future__ import annotations

from testtime.core.results import Lesson
from testtime.knowledge.shared import SharedMemory, own_lessons


def test_a_lesson_keeps_who_taught_it_and_counts_the_problems_that_carried_it() -> None:
    memory = SharedMemory()
    assert memory.shown() == () and memory.version == 0
    assert memory.learn("p0", 0, ["Check the carry."]) == (1,)
    assert memory.version == 1
    for _ in range(3):
        assert memory.shown() == (1,)
    [item] = memory.items
    assert (item.taught_by, item.arrival, item.uses) == ("p0", 0, 3)
    assert memory.render((1,)) == "[M1] Check the carry."


def test_near_duplicates_merge_into_the_older_lesson_and_do_not_move_the_version() -> None:
    memory = SharedMemory()
    memory.learn("p0", 0, ["Do not forget the carry digit."])
    assert memory.learn("p1", 1, ["Do not forget the carry digit!"]) == ()
    assert memory.version == 1 and [i.taught_by for i in memory.items] == ["p0"]
    assert memory.learn("p2", 2, ["Do not forget the carry digit in 17."]) == (2,)  # other numbers: another lesson


def test_the_oldest_lesson_retires_past_the_cap() -> None:
    memory = SharedMemory(cap=2)
    for i, text in enumerate(["Square both sides last.", "Check units before adding.", "Test n = 0 first."]):
        memory.learn(f"p{i}", i, [text])
    assert [i.text for i in memory.active()] == ["Check units before adding.", "Test n = 0 first."]
    assert memory.shown() == (2, 3) and memory.version == 3


def test_only_a_problems_own_reflections_may_generalise() -> None:
    lessons = [
        Lesson(id=1, text="Do not assume symmetry.", source="reflection"),
        Lesson(id=2, text="The answer cannot be 12: it double counts.", source="refutation", rejected_answer="12"),
        Lesson(id=3, text="Do not stop at the first root.", source="reflection", active=False),
    ]
    assert [x.id for x in own_lessons(lessons)] == [1]
