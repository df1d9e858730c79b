"""Answer keys and equivalence: exact canonical forms first, math-verify only when those cannot decide.

Symbolic checks run in a resident worker process with a hard wall-clock bound: math-verify's own timeouts
use `signal.alarm`, which works only on the main thread, and sympy can hang on pathological input. A check
that times out counts as "not equivalent" and the worker is replaced. Results are memoised.
"""

from __future__ import annotations

import json
import math
import re
import select
import subprocess
import sys
import threading
from functools import lru_cache

from testtime.core.answers.normalize import normalize, number_key, split_top_level
from testtime.core.answers.numeric import numerically_equal
from testtime.core.errors import UserError

_WORD = re.compile(r"[a-z]{2,}")
# A symbolic check's bound, in the worker's CPU seconds (its RLIMIT_CPU, whole seconds, set before each check):
# a busy machine stretches wall time, never CPU time, so whether two answers are shown equivalent never depends
# on the load. The kernel ends a worker past it (SIGXCPU), even inside sympy's C code; a fresh one takes the next.
SYMBOLIC_TIMEOUT_S = 5.0
# The last resort for a worker that neither answers nor spends CPU (stopped, or wedged): wall seconds per CPU second
# of the bound, far beyond any load (at 24 runnable processes per core a 5 s check still answers in 120 s).
WALL_PER_CPU_S = 24.0
# Expressions longer than this are not evaluated nor sent to sympy (their keys already differ): a model's
# 10 MB reply is data to compare as text, not a parse to wait on.
EXPRESSION_MAX_CHARS = 2000
STARTUP_TIMEOUT_S = 60.0


@lru_cache(maxsize=65536)
def answer_key(answer: str) -> str:
    """A canonical key: equal keys ⇒ equivalent answers. Numbers become exact rationals ("16", "1/2");
    tuples and intervals keep their bracket types; unbracketed lists are sets (sorted)."""
    s = normalize(answer)
    if (number := number_key(s)) is not None:
        return number
    if len(s) >= 2 and s[0] in "([" and s[-1] in ")]":
        parts = split_top_level(s[1:-1])
        if len(parts) > 1:
            return s[0] + ",".join(answer_key(p) for p in parts) + s[-1]
    if len(s) >= 4 and s.startswith("\\{") and s.endswith("\\}"):  # a set written with its braces
        s = s[2:-2]
    parts = [one for part in split_top_level(s) for one in plus_minus(part)]
    if len(parts) > 1 and all(parts):
        return "{" + ",".join(sorted(answer_key(p) for p in parts)) + "}"
    return s


def plus_minus(s: str) -> list[str]:
    """`a\\pm b` is the two answers a+b and a−b (one top-level `\\pm` or `\\mp`); anything else is itself."""
    signs = s.count("\\pm") + s.count("\\mp")
    if signs != 1 or s.count("{") != s.count("}"):
        return [s]
    sign = "\\pm" if "\\pm" in s else "\\mp"
    before, after = s.split(sign)
    if after.startswith(("+", "-")) or before.count("{") != before.count("}"):
        return [s]  # `\\pm` inside a group, or a sign after it: not the plain two-answer form
    first, second = ("+", "-") if sign == "\\pm" else ("-", "+")
    return [f"{before}{first}{after}", f"{before}{second}{after}"]


def is_exact_number(key: str) -> bool:
    return number_key(key) is not None


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
    if not (isinstance(a, str) and isinstance(b, str)):  # the public API's one-line error, not an AttributeError
        raise UserError(f"equivalent compares answers as text (or None), not {type(a).__name__} and {type(b).__name__}")
    ka, kb = answer_key(a), answer_key(b)
    if ka == kb:
        return True
    if exact_structure(ka) and exact_structure(kb):
        return False
    if _WORD.fullmatch(ka) or _WORD.fullmatch(kb):
        return False  # text answers ("monday", "evelyn") compare as text, already done by the keys
    if (shape := _compare_brackets(ka, kb)) is not None:
        return shape
    if max(len(ka), len(kb)) > EXPRESSION_MAX_CHARS:
        return False
    numeric = numerically_equal(ka, kb)
    if numeric is not None:
        return numeric
    return _symbolic_equal(*sorted((normalize(a), normalize(b))))


def _compare_brackets(ka: str, kb: str) -> bool | None:
    """Tuples/intervals element-wise with their bracket types; sets ({…}) in any order. None: not both."""
    bracketed = [len(k) >= 2 and k[0] in "([{" and k[-1] in ")]}" for k in (ka, kb)]
    if not all(bracketed):
        return False if any(bracketed) and "," in (ka if bracketed[0] else kb) else None
    xs, ys = split_top_level(ka[1:-1]), split_top_level(kb[1:-1])
    if len(xs) == 1 and len(ys) == 1 and ka[0] + ka[-1] == kb[0] + kb[-1] == "()":
        return None  # plain parentheses around one expression: let the expression comparison decide
    if (ka[0], ka[-1]) != (kb[0], kb[-1]) or len(xs) != len(ys):
        return False
    if ka[0] == "{":
        remaining = list(ys)
        for x in xs:
            match = next((y for y in remaining if equivalent(x, y)), None)
            if match is None:
                return False
            remaining.remove(match)
        return True
    return all(equivalent(x, y) for x, y in zip(xs, ys, strict=True))


@lru_cache(maxsize=65536)
def _symbolic_equal(a: str, b: str) -> bool:
    return _WORKER.check(a, b)


class _SymbolicWorker:
    """One resident `symbolic_worker` process answering (a, b) → bool, killed and replaced when a check
    overruns or the process dies. A plain subprocess, not multiprocessing: spawning would re-import the
    caller's `__main__`, which re-runs any user script that lacks a main guard."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[str] | None = None
        self.timeouts = 0
        self.checks = 0  # pairs sent to sympy: the fast path's misses (perf/grading.py reports them)

    def _start(self) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            [sys.executable, "-m", "testtime.core.answers.symbolic_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        # Importing sympy and math-verify takes seconds; that is start-up, not the check's time.
        if self._readline(process, STARTUP_TIMEOUT_S) != "ready":
            self._stop(process)
            raise RuntimeError("the symbolic-equivalence worker did not start")
        return process

    @staticmethod
    def _readline(process: subprocess.Popen[str], timeout: float) -> str | None:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], timeout)
        return process.stdout.readline().strip() if ready else None

    @staticmethod
    def _stop(process: subprocess.Popen[str]) -> None:
        process.kill()
        process.wait()

    def check(self, a: str, b: str) -> bool:
        self.checks += 1
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._process = self._start()
            process = self._process
            assert process.stdin is not None
            budget = max(1, math.ceil(SYMBOLIC_TIMEOUT_S))  # RLIMIT_CPU counts whole seconds
            try:
                process.stdin.write(json.dumps([a, b, budget]) + "\n")
                process.stdin.flush()
                answer = self._readline(process, budget * WALL_PER_CPU_S)  # "": the kernel ended it (SIGXCPU)
            except (BrokenPipeError, OSError):
                answer = None
            if answer in ("0", "1"):
                return answer == "1"
            self.timeouts += 1  # hung or died: either way this pair is "not shown equivalent"
            self._stop(process)
            self._process = None
            return False


_WORKER = _SymbolicWorker()
