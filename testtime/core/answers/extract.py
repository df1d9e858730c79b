"""Find the final answer in a completion: the last well-formed `\\boxed{}` / `\\fbox{}` after the reasoning.

There is deliberately no "last number in the text" fallback: it manufactures answers that then win votes.
"""

from __future__ import annotations

import re

from testtime.core.errors import UserError

_BOX = re.compile(r"\\(?:boxed|fbox)")


def strip_reasoning(text: str) -> str | None:
    """Drop a `<think>…</think>` trace. A trace that never closes has no final answer (None)."""
    close = text.rfind("</think>")
    if close >= 0:
        return text[close + len("</think>") :]
    if "<think>" in text:
        return None
    return text


def _box_content(text: str, start: int) -> str | None:
    """Content of the box whose command ends at `start`, by brace matching; None if malformed."""
    i = start
    while i < len(text) and text[i] == " ":
        i += 1
    if i < len(text) and text[i] == "{":
        depth, j = 0, i
        while j < len(text):
            if text[j] == "\\":
                j += 2  # `\{` and `\}` are literal braces in LaTeX: they neither open nor close the box
                continue
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    return text[i + 1 : j]
            j += 1
        return None
    if i > start:  # the `\boxed 5` form: one token after a space
        token = re.match(r"[^\s$]+", text[i:])
        return token.group(0) if token else None
    return None


def last_boxed(text: str) -> str | None:
    """The content of the last well-formed box, with nested boxes unwrapped."""
    for match in reversed(list(_BOX.finditer(text))):
        content = _box_content(text, match.end())
        if content is not None:
            inner = last_boxed(content)
            return inner if inner is not None else content
    return None


def extract_answer(text: str) -> str | None:
    """The last well-formed `\\boxed{}` (or `\\fbox{}`) after any reasoning trace; None when there is none."""
    if not isinstance(text, str):  # the public API's one-line error, not an AttributeError
        raise UserError(f"extract_answer reads a completion's text, not {type(text).__name__}")
    final = strip_reasoning(text)
    if final is None:
        return None
    content = last_boxed(final)
    if content is None or not content.strip():
        return None
    return content.strip()
