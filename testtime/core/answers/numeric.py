"""Numeric identity testing: decide most symbolic comparisons without sympy.

A small recursive-descent parser turns the common LaTeX subset of answers (numbers, variables, + - * / ^,
implicit products, `\\frac`, `\\sqrt[n]{}`, `\\pi`, `\\cdot`, `\\times`, brackets used for grouping, the
elementary functions of a grouped or single argument, matrices, numerals in a base such as `52_8`, which stand
for themselves) into an evaluator, compiled once per answer. Two expressions are compared at several random
points (variables shared by name) in complex arithmetic with a 1e-9 relative tolerance: agreement everywhere
means equal (the Schwartz–Zippel idea), a clear difference means unequal. A matrix equals only a matrix of its
shape; an expression that adds a matrix to a number is no matrix, so it equals none. Two equations are equal
when one side-difference is a constant multiple of the other. Anything outside the subset returns None and
goes to math-verify.
"""

from __future__ import annotations

import cmath
import random
import re
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Union

from testtime.core.answers.matrix import IllTyped, Matrix

_MATRIX = r"\\begin\{[pb]matrix\}.*?\\end\{[pb]matrix\}"
# A matrix's rows end at a double backslash, or at the single one normalising leaves of "double backslash, space".
_ROW_BREAK = re.compile(r"\\\\|\\(?![a-zA-Z])")
_FUNCTION_NAMES = r"arcsin|arccos|arctan|sinh|cosh|tanh|sin|cos|tan|cot|sec|csc|ln|exp"
_TOKEN = re.compile(
    rf"\s*({_MATRIX}|\d+_\{{\d+\}}|\d+_\d+|\d+\.\d*|\.\d+|\d+|\\(?:{_FUNCTION_NAMES})|\\[a-zA-Z]+|[a-zA-Z]"
    r"|[-+*/^(){}\[\]])"
)
_CONSTANTS = {"\\pi": cmath.pi}
_TIMES = {"*", "\\cdot", "\\times"}
_FUNCTIONS: dict[str, Callable[[complex], complex]] = {
    "\\sin": cmath.sin,
    "\\cos": cmath.cos,
    "\\tan": cmath.tan,
    "\\cot": lambda z: 1 / cmath.tan(z),
    "\\sec": lambda z: 1 / cmath.cos(z),
    "\\csc": lambda z: 1 / cmath.sin(z),
    "\\arcsin": cmath.asin,
    "\\arccos": cmath.acos,
    "\\arctan": cmath.atan,
    "\\sinh": cmath.sinh,
    "\\cosh": cmath.cosh,
    "\\tanh": cmath.tanh,
    "\\ln": cmath.log,
    "\\exp": cmath.exp,
}
POINTS = 3
# A lone e or i (not part of a word such as "cents", nor of a command such as \\sin) a reader takes for a constant.
_CONSTANT_LETTER = re.compile(r"(?<![a-zA-Z\\])[ei](?![a-zA-Z])")
RELATIVE_TOLERANCE = 1e-9


class _Unsupported(Exception):
    pass


Value = Union[complex, Matrix]  # noqa: UP007 - a runtime alias
Evaluator = Callable[[dict[str, complex]], Value]


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
        return (
            token in ("(", "{", "\\frac", "\\sqrt", "\\pi")
            or token in _FUNCTIONS
            or token.startswith("\\begin")
            or token[0].isalnum()
            or token[0] == "."
        )

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
        if token in _FUNCTIONS:
            return self._function(_FUNCTIONS[token])
        if token.startswith("\\begin"):
            return self._matrix(token)
        if "_" in token:  # a numeral in a base (52_8): a value of its own, named by its digits and base
            name = token.replace("{", "").replace("}", "")
            self.variables.add(name)
            return lambda v: v[name]
        if token[0].isdigit() or token[0] == ".":
            number = complex(float(token))
            return lambda v: number
        if len(token) == 1 and token.isalpha():
            self.variables.add(token)
            return lambda v: v[token]
        raise _Unsupported(token)

    def _function(self, f: Callable[[complex], complex]) -> Evaluator:
        """`\\sin x`, `\\sin(x+1)`, `\\sin^2 x`: a grouped argument or a single atom; `\\sin 2x` is ambiguous
        (sin(2)x or sin(2x)), so an atom followed by another is left to math-verify."""
        exponent: Evaluator | None = None
        if self.peek() == "^":
            self.take()
            exponent = self.atom()
        grouped = self.peek() in ("(", "{")
        argument = self.atom()
        following = self.peek()
        if not grouped and following is not None and self._starts_atom(following):
            raise _Unsupported("an ungrouped function argument followed by a product")

        def value(v: dict[str, complex]) -> Value:
            inner = argument(v)
            if isinstance(inner, Matrix):
                raise IllTyped("a function of a matrix")
            result = f(inner)
            return result if exponent is None else result ** exponent(v)  # type: ignore[operator]

        return value

    def _matrix(self, token: str) -> Evaluator:
        body = re.sub(r"^\\begin\{[pb]matrix\}|\\end\{[pb]matrix\}$", "", token)
        rows = []
        for row in _ROW_BREAK.split(body):
            cells = []
            for cell in row.split("&"):
                parser = _Parser(_tokens(cell))
                cells.append(parser.expression())
                if parser.peek() is not None:
                    raise _Unsupported(cell)
                self.variables |= parser.variables
            rows.append(cells)

        def value(v: dict[str, complex]) -> Value:
            return Matrix(tuple(tuple(complex(c(v)) for c in row) for row in rows))  # type: ignore[arg-type]

        return value

    def _braced(self) -> Evaluator:
        if self.peek() != "{":
            return self.atom()  # \frac12 style single-token arguments
        self.take("{")
        inner = self.expression()
        self.take("}")
        return inner


@lru_cache(maxsize=65536)
def _compile(s: str) -> tuple[Evaluator, frozenset[str]] | None:
    """An answer's evaluator and its variables, built once per answer (None: outside the subset)."""
    try:
        parser = _Parser(_tokens(s))
        evaluator = parser.expression()
        if parser.peek() is not None:
            return None
        return evaluator, frozenset(parser.variables)
    except (_Unsupported, RecursionError):
        return None


def _points(a: str, b: str, names: frozenset[str]) -> Iterator[dict[str, complex]]:
    """The random points a pair is compared at: seeded by the pair, variables shared by name."""
    rng = random.Random(f"{a}\x00{b}")
    for _ in range(POINTS):
        yield {name: complex(rng.uniform(0.5, 2.5), 0) for name in sorted(names)}


def _typed(evaluator: Evaluator, point: dict[str, complex]) -> Value | None:
    """The expression's value at `point`; None when it has none (a number added to a matrix)."""
    try:
        return evaluator(point)
    except IllTyped:
        return None


def _finite(x: Value) -> bool:
    if isinstance(x, Matrix):
        return all(cmath.isfinite(a) for row in x.rows for a in row)
    return cmath.isfinite(x)


def _differ(x: Value, y: Value) -> bool:
    if isinstance(x, Matrix) or isinstance(y, Matrix):
        if not (isinstance(x, Matrix) and isinstance(y, Matrix)) or x.shape != y.shape:
            return True  # a matrix equals only a matrix of its shape
        return any(_differ(a, b) for ra, rb in zip(x.rows, y.rows, strict=True) for a, b in zip(ra, rb, strict=True))
    return abs(x - y) > RELATIVE_TOLERANCE * max(1.0, abs(x), abs(y))


_ARITHMETIC_ERRORS = (ZeroDivisionError, OverflowError, ValueError, RecursionError)  # RecursionError: 1+1+…+1


def numerically_equal(a: str, b: str) -> bool | None:
    """True/False when both parse and evaluate; None when either is outside the subset."""
    if a.count("=") == 1 and b.count("=") == 1:
        return _equations_equal(a, b)
    if "=" in a or "=" in b:
        return None
    left, right = _compile(a), _compile(b)
    if left is None or right is None:
        return None
    if set(_CONSTANT_LETTER.findall(a)) ^ set(_CONSTANT_LETTER.findall(b)):
        return None  # a lone e or i on one side only: most likely Euler's number or the imaginary unit
    for point in _points(a, b, left[1] | right[1]):
        try:
            x, y = _typed(left[0], point), _typed(right[0], point)
        except _ARITHMETIC_ERRORS:
            return None
        if x is None or y is None:  # an expression with no value equals nothing with one
            return None if x is None and y is None else False
        if not (_finite(x) and _finite(y)):
            return None
        if _differ(x, y):
            return False
    return True


def _equations_equal(a: str, b: str) -> bool | None:
    """`l1 = r1` and `l2 = r2` state the same thing when l1 − r1 is a constant, nonzero multiple of l2 − r2."""
    sides = [_compile(side) for side in (*a.split("="), *b.split("="))]
    if any(side is None for side in sides):
        return None
    (la, va), (ra, wa), (lb, vb), (rb, wb) = sides  # type: ignore[misc]
    ratios = []
    for point in _points(a, b, va | wa | vb | wb):
        try:
            da, db = la(point) - ra(point), lb(point) - rb(point)
        except (IllTyped, *_ARITHMETIC_ERRORS):
            return None
        if isinstance(da, Matrix) or isinstance(db, Matrix) or not (_finite(da) and _finite(db)):
            return None
        if abs(db) < RELATIVE_TOLERANCE or abs(da) < RELATIVE_TOLERANCE:
            return None  # a point on either solution set says nothing about the ratio
        ratios.append(da / db)
    return not any(_differ(r, ratios[0]) for r in ratios[1:])
