"""A problem statement's math, rendered: `$...$`, `$$...$$`, `\\(...\\)` and `\\[...\\]` become MathML trees.

latex2mathml writes MathML as a string; the page never parses a string as markup, so the string is read
here into a tree of whitelisted MathML elements (`[tag, {attr: value}, child, ...]`, a child a tree or a
text) that the page builds with `createElementNS`. Anything outside the whitelist, or TeX the converter
cannot read, stays plain text: a hostile statement can at worst look odd, never run.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

NS = "{http://www.w3.org/1998/Math/MathML}"
TAGS = frozenset(
    "math mrow mi mn mo ms mtext mspace msup msub msubsup mfrac msqrt mroot mover munder munderover "
    "mtable mtr mtd mstyle mpadded mphantom menclose".split()
)
ATTRIBUTES = frozenset(
    "display mathvariant displaystyle scriptlevel stretchy fence separator lspace rspace accent accentunder "
    "movablelimits linethickness width height depth columnalign rowalign notation largeop symmetric".split()
)
# Inline `$` as pandoc reads it: no space inside either dollar, no digit after the closing one ("$5 and $6")
MATH = re.compile(r"\$\$(.+?)\$\$|\\\[(.+?)\\\]|(?<!\\)\$(?=\S)(.+?)(?<=\S)(?<!\\)\$(?!\d)|\\\((.+?)\\\)", re.DOTALL)
MAX_TEX = 2000  # longer "math" is more likely a stray dollar sign than a formula

Tree = list[Any]


def segments(text: str) -> list[dict[str, Any]]:
    """The statement cut into `{"text": ...}` and `{"math": tree, "display": bool, "tex": ...}` pieces."""
    pieces: list[dict[str, Any]] = []
    at = 0
    for match in MATH.finditer(text):
        display = match.group(1) is not None or match.group(2) is not None
        tex = next(g for g in match.groups() if g is not None)
        tree = to_tree(tex, display)
        if tree is None:
            continue  # left as text, dollar signs and all
        if match.start() > at:
            pieces.append({"text": text[at : match.start()]})
        pieces.append({"math": tree, "display": display, "tex": tex})
        at = match.end()
    if at < len(text):
        pieces.append({"text": text[at:]})
    return pieces


def to_tree(tex: str, display: bool = False) -> Tree | None:
    """One formula as a whitelisted MathML tree, or None when it cannot be rendered safely."""
    if len(tex) > MAX_TEX or not tex.strip():
        return None
    try:
        from latex2mathml.converter import convert

        root = ET.fromstring(convert(tex, display="block" if display else "inline"))
    except Exception:  # noqa: BLE001 -- any TeX the converter chokes on, or MathML that is not XML, stays text
        return None
    return _tree(root)


def _tree(element: ET.Element) -> Tree | None:
    tag = element.tag.removeprefix(NS)
    if tag not in TAGS:
        return None
    attributes = {k: v for k, v in element.attrib.items() if k in ATTRIBUTES}
    node: Tree = [tag, attributes]
    if element.text:
        node.append(element.text)
    for child in element:
        sub = _tree(child)
        if sub is None:
            return None
        node.append(sub)
        if child.tail:
            node.append(child.tail)
    return node
