"""What a learning endpoint learns from, decided when each request is answered: the probe held out, a question
counted once a window, one client's share of a window bounded, and a burst bounded to one update in flight and one
waiting."""

from __future__ import annotations

from testtime.core.records import Problem
from testtime.methods.ttrl.admission import Windows


def asked(i: int, text: str | None = None) -> Problem:
    return Problem(id=f"r{i}", domain="math", statement=text or f"What is {i} + 1?")


def test_the_first_distinct_questions_are_the_probe_at_most_half_from_one_client() -> None:
    windows = Windows(update_every=4, max_client_share=0.5, probe_size=4)
    assert windows.admit(asked(100), "user:b", busy=False).probe
    said = [windows.admit(asked(i), "user:a", busy=False) for i in range(3)]
    assert [a.probe for a in said] == [True, True, False]  # beside another client, one brings at most half
    assert said[2].learned
    assert windows.admit(asked(9, "What is 0 + 1?"), "user:b", busy=False).learned is False  # a probe question


def test_a_server_with_one_client_learns_from_all_its_traffic() -> None:
    windows = Windows(update_every=4, max_client_share=0.5, probe_size=4)
    said = [windows.admit(asked(i), "address:10.0.0.1", busy=False) for i in range(8)]
    assert [a.probe for a in said] == [True] * 4 + [False] * 4 and all(a.learned for a in said[4:])
    assert windows.due() == 1


def test_a_flood_of_one_question_is_learned_from_once_a_window() -> None:
    """16 copies of one question from one client beside another client's traffic: at most one per window."""
    windows = Windows(update_every=4, max_client_share=0.5, probe_size=0)
    flooded = []
    for i in range(16):
        flooded.append(windows.admit(asked(100 + i, "What is 2 + 2?"), "user:flooder", busy=False))
        windows.admit(asked(i), "user:other", busy=False)
    learned = sum(a.learned for a in flooded)
    assert 1 <= learned <= len(windows.admitted) // 4 + 1 and learned <= 8
    assert {a.why for a in flooded if not a.learned} <= {
        "asked again in this window: a question counts once",
        "client share: 2 of this window's 4 requests are user:flooder's already",
    }


def test_one_client_brings_at_most_its_share_of_a_window() -> None:
    windows = Windows(update_every=4, max_client_share=0.5, probe_size=0)
    windows.recent.append("user:b")  # another client asked a moment ago
    said = [windows.admit(asked(i), "user:a", busy=False) for i in range(4)]
    assert [a.learned for a in said] == [True, True, False, False]
    assert said[2].why == "client share: 2 of this window's 4 requests are user:a's already"
    assert windows.admit(asked(50), "user:b", busy=False).learned


def test_a_burst_costs_one_update_in_flight_and_one_waiting() -> None:
    windows = Windows(update_every=4, max_client_share=1.0, probe_size=0)
    said = [windows.admit(asked(i), f"address:{i}", busy=True) for i in range(64)]
    assert sum(a.learned for a in said) == 4 and windows.due() == 1
    assert said[-1].why == "backlog: one update trains and the next window is full"
    windows.started = 1  # the waiting window begins: the next one fills
    assert windows.admit(asked(64), "address:x", busy=True).learned
