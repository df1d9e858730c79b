"""The viewer's one page: plain HTML, CSS and JavaScript, no external asset (it works offline and as a file).

The data arrives as JSON: the index inline; a problem's detail inline too in a static page (`--html`), else
fetched from the local server. Every text a model wrote is set with `textContent`, never parsed as HTML: a
model output cannot script the page. `window.onerror` records errors on the page itself (tests read them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
STYLE = (HERE / "page.css").read_text()
SCRIPT = (HERE / "page.js").read_text()


def script_safe_json(data: object) -> str:
    """JSON to inline in a <script>: `<`, `>` and `&` escaped (they occur only inside strings), so neither
    "</script>" nor "<!--<script>" (which makes the parser skip the real closing tag) can end the block, and
    U+2028/U+2029 escaped for engines that end a line on them."""
    text = json.dumps(data, ensure_ascii=False)
    for char, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escaped)
    return text


def render(data: dict[str, Any], title: str) -> str:
    """The page, with `data` ({"runs": [...], "details": [...] or absent}) embedded as JSON."""
    payload = script_safe_json(data)
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{_escape(title)}</title><style>{STYLE}</style>"
        f"</head><body><header>testtime view · {_escape(title)}</header><main><div id='runs'></div>"
        f"<div id='detail'></div></main><pre id='errors' style='color:#a31515'></pre>"
        f"<script>const DATA = {payload};</script><script>{SCRIPT}</script></body></html>"
    )


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
