"""What a learning endpoint learns from: each answered request is admitted to an update's window, held out for the
gate's probe, or answered and not learned from, decided when it is answered (its record says which and why).

- The probe: the first `gate_probe` distinct questions (at most half of them from one client) are held out of
  every window; the gate (`gate.py`) scores each update's weights on them.
- A window takes `update_every` new requests; a question asked again inside it counts once, and while other
  clients are asking too (among the last 2 × `update_every` requests), one client may bring at most
  `max_client_share` of it (at least one request): a flood of one question, or of one client's questions, cannot
  outvote the others' traffic in what the weights learn. A server with one client learns from all its traffic
  (its questions still count once a window); the same bound holds the probe to half from one client.
- A bounded backlog: while one update trains and the next window is full, further requests are answered and not
  learned from, so a burst of N requests costs at most one update in flight and one waiting, never N / B updates.

A request's client is the OpenAI `user` field, else the address it came from (`serve/app.py`'s `client_of`).
"""

from __future__ import annotations

import math
from collections import Counter, deque
from dataclasses import dataclass, field

from testtime.core.records import Problem

PROBE_WHY = "held out: one of the gate's probe questions"


@dataclass(frozen=True)
class Admission:
    """Whether a request is learned from, and why not."""

    learned: bool
    why: str | None = None  # None when learned
    probe: bool = False  # held out for the gate

    @classmethod
    def recorded(cls, learned: bool | None, why: str | None) -> Admission:
        """The decision a `requests.jsonl` line records (`learned` absent in older runs: learned from)."""
        return cls(learned is not False, why, probe=why == PROBE_WHY)


def question_of(problem: Problem) -> str:
    """The question a request asks, as a window counts it: its words, whitespace and case aside."""
    return " ".join(problem.statement.split()).casefold()


@dataclass
class Windows:
    """The probe, the requests admitted to updates, and the window now filling."""

    update_every: int
    max_client_share: float
    probe_size: int
    probe: list[Problem] = field(default_factory=list)
    admitted: list[Problem] = field(default_factory=list)  # in order; update k's new requests are [(k-1)B, kB)
    clients: dict[str, str] = field(default_factory=dict)  # problem id → client
    started: int = 0  # updates begun (running, finished or skipped): windows taken from `admitted`
    recent: deque[str] = field(init=False)  # the clients of the last 2 × update_every requests

    def __post_init__(self) -> None:
        self.recent = deque(maxlen=2 * self.update_every)

    @property
    def per_client(self) -> int:
        return max(1, math.floor(self.max_client_share * self.update_every))

    def filling(self) -> list[Problem]:
        """The requests admitted since the last full window (the next update's new ones, while it fills)."""
        full = len(self.admitted) // self.update_every * self.update_every
        return self.admitted[full:]

    def due(self) -> int:
        """Full windows not yet begun."""
        return len(self.admitted) // self.update_every - self.started

    def admit(self, problem: Problem, client: str, busy: bool) -> Admission:
        """Decide for one answered request (`busy`: an update trains now)."""
        question = question_of(problem)
        self.recent.append(client)
        shared = len(set(self.recent)) > 1  # other clients ask too: one client's share is bounded
        if len(self.probe) < self.probe_size and question not in {question_of(p) for p in self.probe}:
            mine = sum(self.clients.get(p.id) == client for p in self.probe)
            if not shared or mine < max(1, self.probe_size // 2):
                self.probe.append(problem)
                self.clients[problem.id] = client
                return Admission(False, PROBE_WHY, probe=True)
        if self.due() >= 1 and busy:
            return Admission(False, "backlog: one update trains and the next window is full")
        window = self.filling()
        if question in {question_of(p) for p in window}:
            return Admission(False, "asked again in this window: a question counts once")
        if question in {question_of(p) for p in self.probe}:
            return Admission(False, "a probe question: held out of every window")
        count = Counter(self.clients.get(p.id) for p in window)[client]
        if shared and count >= self.per_client:
            return Admission(
                False, f"client share: {count} of this window's {self.update_every} requests are {client}'s already"
            )
        self.admitted.append(problem)
        self.clients[problem.id] = client
        return Admission(True)

    def restore(self, problem: Problem, client: str, admission: Admission) -> None:
        """Replay a recorded decision (a restart rebuilds the windows from requests.jsonl)."""
        self.clients[problem.id] = client
        self.recent.append(client)
        if admission.probe:
            self.probe.append(problem)
        elif admission.learned:
            self.admitted.append(problem)

    def window(self, update: int, size: int) -> list[Problem]:
        """Update k's window: the last `size` admitted requests up to its due point (its own B new ones first)."""
        return self.admitted[: update * self.update_every][-size:]
