"""Answer keys and equivalence: exact canonical forms first, math-verify only when those cannot decide.

Symbolic checks run in a resident worker process with a hard wall-clock bound: math-verify's own timeouts
use `signal.alarm`, which works only on the main thread, and sympy can hang on pathological input. A check
that times out counts as "not equivalent" and the worker is replaced. Results are memoised.
"""

from __future__ import annotations

import multiprocessing as mp
import threading
from functools import lru_cache
from typing import Any

from testtime.core.answers.normalize import exact_number, normalize, split_top_level

SYMBOLIC_TIMEOUT_S = 5.0


@lru_cache(maxsize=65536)
def answer_key(answer: str) -> str:
    """A canonical key: equal keys ⇒ equivalent answers. Numbers become exact rationals ("16", "1/2");
    tuples and intervals keep their bracket types; unbracketed lists are sets (sorted)."""
    s = normalize(answer)
    if (number := exact_number(s)) is not None:
        return str(number)
    if len(s) >= 2 and s[0] in "([" and s[-1] in ")]":
        parts = split_top_level(s[1:-1])
        if len(parts) > 1:
            return s[0] + ",".join(answer_key(p) for p in parts) + s[-1]
    parts = split_top_level(s)
    if len(parts) > 1 and all(parts):
        return "{" + ",".join(sorted(answer_key(p) for p in parts)) + "}"
    return s


def is_exact_number(key: str) -> bool:
    return exact_number(key) is not None


def exact_structure(key: str) -> bool:
    """True when the key is made only of exact numbers, so unequal keys are surely unequal values."""
    if is_exact_number(key):
        return True
    if len(key) >= 2 and key[0] in "([{" and key[-1] in ")]}":
        return all(is_exact_number(p) for p in split_top_level(key[1:-1]))
    return False


def equivalent(a: str | None, b: str | None) -> bool:
    """Symmetric equivalence of two extracted answers. None (no answer) equals nothing, itself included."""
    if a is None or b is None:
        return False
    ka, kb = answer_key(a), answer_key(b)
    if ka == kb:
        return True
    if exact_structure(ka) and exact_structure(kb):
        return False
    return _symbolic_equal(*sorted((normalize(a), normalize(b))))


@lru_cache(maxsize=65536)
def _symbolic_equal(a: str, b: str) -> bool:
    return _WORKER.check(a, b)


def _worker_main(conn: Any) -> None:
    import logging

    logging.disable(logging.WARNING)  # math-verify warns on every call that its own timeouts are off
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    configs = [LatexExtractionConfig(), ExprExtractionConfig()]
    while True:
        a, b = conn.recv()
        try:
            pa = parse(f"${a}$", extraction_config=configs, parsing_timeout=None)
            pb = parse(f"${b}$", extraction_config=configs, parsing_timeout=None)
            same = bool(pa and pb and (verify(pa, pb, timeout_seconds=None) or verify(pb, pa, timeout_seconds=None)))
        except Exception:  # noqa: BLE001 - an unparsable answer is simply not equivalent
            same = False
        conn.send(same)


class _SymbolicWorker:
    """One resident process answering (a, b) → bool; killed and replaced when a check overruns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: Any = None
        self._conn: Any = None
        self._warming = True  # a new worker's first check also pays for importing sympy and math-verify
        self.timeouts = 0

    def _start(self) -> None:
        parent, child = mp.get_context("spawn").Pipe()
        self._process = mp.get_context("spawn").Process(target=_worker_main, args=(child,), daemon=True)
        self._process.start()
        self._conn = parent
        self._warming = True

    def check(self, a: str, b: str) -> bool:
        with self._lock:
            if self._process is None or not self._process.is_alive():
                self._start()
            self._conn.send((a, b))
            if self._conn.poll(SYMBOLIC_TIMEOUT_S + (20.0 if self._warming else 0.0)):
                self._warming = False
                return bool(self._conn.recv())
            self.timeouts += 1
            self._process.kill()
            self._process.join()
            self._process = None
            return False


_WORKER = _SymbolicWorker()
