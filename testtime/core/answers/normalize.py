"""Canonical string forms of math answers: the fast path that settles most comparisons without sympy.

Rules follow the field's known pitfalls (shared/docs/reference/benchmarks-and-grading.md §8): leading zeros,
`\\dfrac`/`\\frac12`, thousands separators, `x=` and `x \\in` prefixes, `\\text{}` wrappers, units, degrees, percent,
dollar signs, choice letters, tuples and intervals with their bracket types.
"""

from __future__ import annotations

import re
from fractions import Fraction

_WRAPPERS = re.compile(r"\\(?:text|textbf|textit|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}")
_DROP = [
    r"\left",
    r"\right",
    r"\displaystyle",
    r"\!",
    r"\,",
    r"\;",
    r"\:",
    r"\ ",
    "~",
    r"\$",
    "$",
    r"\(",
    r"\)",
    r"\[",
    r"\]",
    r"\%",
    "%",
    "°",
]
_DEGREES = re.compile(r"\^\s*\{?\s*\\circ\s*\}?")
_SHORT_FRAC = re.compile(r"\\frac\s*(\d)\s*(\d)")
_SHORT_SQRT = re.compile(r"\\sqrt\s*(\d+)")
_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_VAR_PREFIX = re.compile(r"^\s*(?:[a-zA-Z]|\\[a-zA-Z]+)(?:_\{?\w+\}?)?\s*(?:=|\\in(?![a-zA-Z]))\s*(?=[^=]+$)")
_CHOICE = re.compile(r"^\(?([A-Ea-e])\)?$")
# A unit is a word after a number ("12 cm", "5cents"); a lone letter glued to it is a variable ("6x").
_NUMBER_WITH_UNIT = re.compile(r"^([+-]?\d+(?:\.\d+)?)(?:\s+[a-zA-Z][a-zA-Z ]*|[a-zA-Z]{2,}[a-zA-Z ]*)$")
_NUMBER = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)$")
_LATEX_FRACTION = re.compile(r"^([+-]?)\\frac\{([+-]?\d+)\}\{([+-]?\d+)\}$")
_SLASH_FRACTION = re.compile(r"^([+-]?\d+)/([+-]?\d+)$")


def normalize(answer: str) -> str:
    s = answer.strip()
    s = s.replace(r"\dfrac", r"\frac").replace(r"\tfrac", r"\frac").replace("{,}", "")
    s = _DEGREES.sub("", s)
    for _ in range(3):  # nested wrappers: \text{\textbf{(D)}}
        s = _WRAPPERS.sub(r"\1", s)
    for token in _DROP:
        s = s.replace(token, "")
    s = _SHORT_FRAC.sub(r"\\frac{\1}{\2}", s)
    s = _SHORT_SQRT.sub(r"\\sqrt{\1}", s)
    s = s.strip().rstrip(".").strip()
    s = _VAR_PREFIX.sub("", s, count=1)
    if _THOUSANDS.match(s):
        s = s.replace(",", "")
    if (unit := _NUMBER_WITH_UNIT.match(s)) is not None:
        s = unit.group(1)
    if (choice := _CHOICE.match(s)) is not None and (len(s) == 1 or s.startswith("(")):
        return choice.group(1).upper()
    s = re.sub(r"\s+", "", s)
    if re.fullmatch(r"[A-Za-z]{2,}", s):
        s = s.lower()  # words: "Monday" == "monday"
    return s


# Python refuses int(str) past 4,300 digits (CVE-2020-10735) and a model may write such a number: an answer is
# data, never a reason to stop. Past this many characters a number's key is its canonical text, not a rational.
EXACT_CHARS = 1000


def number_key(s: str) -> str | None:
    """A normalised answer's canonical key if it is an exact number (integer, decimal, a/b, \\frac{a}{b}):
    the rational's text ("16", "1/2", "-3/4"); None when it is not a number. Bounded by construction: a number
    longer than `EXACT_CHARS` is keyed by its canonical decimal text, never parsed into an integer."""
    if _NUMBER.match(s):
        if len(s) > EXACT_CHARS:
            text = _canonical_decimal(s)
            return text if len(text) > EXACT_CHARS else str(Fraction(text))
        return str(Fraction(s))
    if len(s) > EXACT_CHARS:
        return None  # a long fraction: compared as text
    if (m := _LATEX_FRACTION.match(s)) is not None:
        sign, num, den = m.groups()
        if int(den) != 0:
            return str(Fraction(int(num), int(den)) * (-1 if sign == "-" else 1))
    if (m := _SLASH_FRACTION.match(s)) is not None and int(m.group(2)) != 0:
        return str(Fraction(int(m.group(1)), int(m.group(2))))
    return None


def _canonical_decimal(s: str) -> str:
    """A decimal's text with no '+', no leading zeros, no trailing fractional zeros: equal values, equal text."""
    negative = s.startswith("-")
    whole, _, fraction = s.lstrip("+-").partition(".")
    whole, fraction = whole.lstrip("0") or "0", fraction.rstrip("0")
    text = f"{whole}.{fraction}" if fraction else whole
    return f"-{text}" if negative and text != "0" else text


def split_top_level(s: str) -> list[str]:
    """Split on commas not nested in brackets or braces."""
    parts, depth, current = [], 0, []
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return parts
