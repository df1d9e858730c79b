"""A plugin's own kinds of call, readable: docs/plugins.md's `critic.py` run as users run it, every ledger line
naming its kind (solve included), and `testtime view --html` showing each problem's critique with its reply
(folded), the problems in the benchmark's order."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.cli.test_as_users_run import logged
from tests.experiments.test_view import dom, errors_in, needs_chromium
from tests.helpers import docs_plugin


def _critic(tmp_path: Path) -> Path:
    plugin = docs_plugin("critic.py", tmp_path)
    out = tmp_path / "run"
    status, said = logged(tmp_path, "run", "--plugin", str(plugin), "--method", "critic", "--bench", "arith",
                          "--limit", "4", "--model", "fake:echo", "--out", str(out))  # fmt: skip
    assert status == 0, said
    return out


def test_every_ledger_line_names_its_kind_of_call(tmp_path: Path) -> None:
    out = _critic(tmp_path)
    lines = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    assert sorted({line["purpose"] for line in lines}) == ["critique", "solve"]
    assert all("kind" in line and "purpose" in line for line in lines)


@needs_chromium
def test_the_viewer_shows_a_plugins_other_calls_with_their_replies(tmp_path: Path) -> None:
    out = _critic(tmp_path)
    page_file = tmp_path / "view.html"
    status, said = logged(tmp_path, "view", str(out), "--html", str(page_file))
    assert status == 0, said
    page = dom(f"{page_file.as_uri()}#run=0&problem=arith-d2-1")
    assert 'data-shown="arith-d2-1"' in page and errors_in(page).strip() == ""
    assert "other calls (1)" in page and "critique" in page and "Find the flaw" in page
    listed = list(dict.fromkeys(re.findall(r"arith-d2-\d", page.split('id="runs"')[1])))
    assert listed[:4] == ["arith-d2-0", "arith-d2-1", "arith-d2-2", "arith-d2-3"]  # the benchmark's order
