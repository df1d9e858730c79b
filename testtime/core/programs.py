"""Find the program in a code completion: the last fenced code block after any reasoning trace.

No fenced block means no code (`None`), its own class like "no answer" for math: a bare completion is
never executed as if it were a program.
"""

from __future__ import annotations

import re

from testtime.core.answers import strip_reasoning

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)


def extract_program(text: str) -> str | None:
    """The last fenced block (a Python one where there are several languages) after any reasoning trace; None
    when there is none or it is empty."""
    final = strip_reasoning(text)
    if final is None:
        return None
    blocks = _FENCE.findall(final)
    python = [code for language, code in blocks if language.lower() in ("", "python", "python3", "py")]
    program = (python or [code for _, code in blocks] or [""])[-1]
    return program if program.strip() else None
