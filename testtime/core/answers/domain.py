"""`--domain auto`: whether a problem is math (a `\\boxed{}` answer, voted by equivalence) or text (a free reply,
chosen among whole replies), read from its words and its label. One rule for a user's file and a served request:

- a label decides when there is one: prose (a word, no digit, no LaTeX or math sign) is text, else math;
- without one, the problem is math when it asks for a boxed answer, writes mathematics (LaTeX, an equation or
  an arithmetic expression) or asks for a computation ("how many", "compute", "solve", ...); else text.

A haiku request, "What is the capital of France?" and a summary are text; "What is 17 * 23?", an AIME problem
and "Compute the remainder of 2^100 mod 7" are math. The chosen domain is recorded (the manifest for a file,
each request's line for serve), and `--domain` (`--bench-opt domain=`) overrides it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

_WORD = re.compile(r"[^\W\d_]{3,}")  # a word of three letters or more, in any script
_MATHLIKE = re.compile(r"[\d\\^_{}=$]")  # a digit, LaTeX, or a math sign: a math answer's marks
_ASKS_FOR_A_BOX = re.compile(r"\\boxed|\bboxed\b|\bin a box\b", re.I)
_LATEX = re.compile(r"\$[^$\n]+\$|\\\(|\\\[|\\(?:frac|dfrac|sqrt|sum|int|cdot|times|binom|le|ge|neq|pi)\b")
_EXPRESSION = re.compile(r"\d\s*[+*/^=<>×÷]\s*\(?-?\d|\d\s+-\s+\d|\b[a-z]\s*(?:\^|\*\*)\s*\d|\b[a-z]\s*=\s*-?\d")
_COMPUTATION = re.compile(
    r"\b(?:how many|how much|compute|calculate|evaluate|simplify|solve|remainder|probability|integer|"
    r"sum of|product of|equation|digits?)\b",
    re.I,
)


def prose_label(label: str) -> bool:
    """A label that reads as prose: a word of three letters, and no digit, LaTeX or math sign."""
    return bool(_WORD.search(label)) and not _MATHLIKE.search(label)


def asks_for_math(statement: str) -> bool:
    """A problem that wants a mathematical answer: a box asked for, mathematics written, or a computation."""
    return any(p.search(statement) for p in (_ASKS_FOR_A_BOX, _LATEX, _EXPRESSION, _COMPUTATION))


def auto_domain(statements: Sequence[str], labels: Sequence[str] = ()) -> Literal["math", "text"]:
    """The domain of a set of problems (one request: one statement): by the labels where any is given (text
    when most are prose), else by the statements (math when most ask for math). Nothing to read: math."""
    given = [label.strip() for label in labels if label.strip()]
    if given:
        return "text" if sum(map(prose_label, given)) * 2 > len(given) else "math"
    if not statements:
        return "math"
    return "math" if sum(map(asks_for_math, statements)) * 2 >= len(statements) else "text"
