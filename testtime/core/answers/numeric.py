"""Numeric identity testing: decide most symbolic comparisons without sympy.

A small recursive-descent parser turns the common LaTeX subset of answers (numbers, variables, + - * / ^,
implicit products, `\\frac`, `\\sqrt[n]{}`, `\\pi`, `\\cdot`, `\\times`, brackets used for grouping) into
an evaluator. Two expressions are compared at several random points (variables shared by name) in complex
arithmetic with a 1e-9 relative tolerance: agreement everywhere means equal (the Schwartz–Zippel idea),
a clear difference means unequal. Anything outside the subset returns None and goes to math-verify.
"""

from __future__ import annotations

import cmath
import random
import re
from collections.abc import Callable

Value = complex
Evaluator = Callable[[dict[str, Value]], Value]

_TOKEN = re.compile(r"\s*(\d+\.\d*|\.\d+|\d+|\\[a-zA-Z]+|[a-zA-Z]|[-+*/^(){}\[\]])")
_CONSTANTS = {"\\pi": cmath.pi}
_TIMES = {"*", "\\cdot", "\\times"}
POINTS = 3
RELATIVE_TOLERANCE = 1e-9


class _Unsupported(Exception):
    pass


def _tokens(s: str) -> list[str]:
    out, pos = [], 0
    while pos < len(s):
        match = _TOKEN.match(s, pos)
        if match is None:
            raise _Unsupported(s[pos:])
        out.append(match.group(1))
        pos = match.end()
    return out


class _Parser:
    def __init__(self, tokens: list[str]) -> None:
        self.tokens, self.i = tokens, 0
        self.variables: set[str] = set()

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise _Unsupported(f"expected {expected}, got {token}")
        self.i += 1
        return token

    def expression(self) -> Evaluator:
        left = self.term()
        while self.peek() in ("+", "-"):
            op, right, prev = self.take(), self.term(), left
            left = (lambda v, a=prev, b=right: a(v) + b(v)) if op == "+" else (lambda v, a=prev, b=right: a(v) - b(v))
        return left

    def term(self) -> Evaluator:
        left = self.unary()
        while True:
            token = self.peek()
            if token in _TIMES or token == "/":
                self.take()
                right, prev = self.unary(), left
                left = (
                    (lambda v, a=prev, b=right: a(v) / b(v))
                    if token == "/"
                    else (lambda v, a=prev, b=right: a(v) * b(v))
                )
            elif token is not None and self._starts_atom(token):
                right, prev = self.power(), left  # implicit product: 2x, 3\sqrt{2}, x(x+1)
                left = lambda v, a=prev, b=right: a(v) * b(v)  # noqa: E731
            else:
                return left

    def unary(self) -> Evaluator:
        if self.peek() == "-":
            self.take()
            inner = self.unary()
            return lambda v: -inner(v)
        if self.peek() == "+":
            self.take()
        return self.power()

    def power(self) -> Evaluator:
        base = self.atom()
        if self.peek() == "^":
            self.take()
            exponent = self.atom() if self.peek() != "-" else self.unary()
            return lambda v: base(v) ** exponent(v)
        return base

    @staticmethod
    def _starts_atom(token: str) -> bool:
        return token in ("(", "{", "\\frac", "\\sqrt", "\\pi") or token[0].isalnum() or token[0] == "."

    def atom(self) -> Evaluator:
        token = self.take()
        if token in ("(", "{", "["):
            inner = self.expression()
            self.take({"(": ")", "{": "}", "[": "]"}[token])
            return inner
        if token == "\\frac":
            numerator, denominator = self._braced(), self._braced()
            return lambda v: numerator(v) / denominator(v)
        if token == "\\sqrt":
            degree: Evaluator = lambda v: 2  # noqa: E731
            if self.peek() == "[":
                self.take()
                degree = self.expression()
                self.take("]")
            radicand = self._braced()
            return lambda v: radicand(v) ** (1 / degree(v))
        if token in _CONSTANTS:
            value = _CONSTANTS[token]
            return lambda v: value
        if token[0].isdigit() or token[0] == ".":
            number = complex(float(token))
            return lambda v: number
        if len(token) == 1 and token.isalpha():
            self.variables.add(token)
            return lambda v: v[token]
        raise _Unsupported(token)

    def _braced(self) -> Evaluator:
        if self.peek() != "{":
            return self.atom()  # \frac12 style single-token arguments
        self.take("{")
        inner = self.expression()
        self.take("}")
        return inner


def _compile(s: str) -> tuple[Evaluator, set[str]] | None:
    try:
        parser = _Parser(_tokens(s))
        evaluator = parser.expression()
        if parser.peek() is not None:
            return None
        return evaluator, parser.variables
    except (_Unsupported, RecursionError):
        return None


def numerically_equal(a: str, b: str) -> bool | None:
    """True/False when both parse and evaluate; None when either is outside the subset."""
    left, right = _compile(a), _compile(b)
    if left is None or right is None:
        return None
    rng = random.Random(f"{a}\x00{b}")
    names = sorted(left[1] | right[1])
    for _ in range(POINTS):
        point = {name: complex(rng.uniform(0.5, 2.5), 0) for name in names}
        try:
            x, y = left[0](point), right[0](point)
        except (ZeroDivisionError, OverflowError, ValueError, RecursionError):  # RecursionError: 1+1+…+1
            return None
        if not (cmath.isfinite(x) and cmath.isfinite(y)):
            return None
        if abs(x - y) > RELATIVE_TOLERANCE * max(1.0, abs(x), abs(y)):
            return False
    return True
