"""A plugin selector that asks the model, against hostile replies: a reply naming a candidate that does not exist
is refused before it is recorded (the prediction would have come from no candidate), a reply its code cannot read
is one line naming the plugin's file and line, and a plugin that fails to load names its file and line too. As
users run it: the installed command, stderr to a file."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.cli.test_as_users_run import logged

JUDGE = textwrap.dedent(
    '''
    """Asks the model which candidate is right, and believes it."""
    from testtime.api import SELECTORS, Message, Selection, Selector


    @SELECTORS.register("judge", help="asks the model which candidate is right")
    class Judge(Selector):
        def call_kinds(self):
            return ("judge",)

        async def select(self, problem, candidates, ctx):
            reply = await ctx.ask("judge", [Message(role="user", content="Which one? Answer with its number.")])
            index = int(reply.text.strip())
            answer = candidates[index].answer if 0 <= index < len(candidates) else "12345"
            return Selection(selector=self.name, rule="judged", index=index, answer=answer)
    '''
)


def _judged(tmp_path: Path, reply: str) -> tuple[int, str, Path]:
    plugin, script, out = tmp_path / "judge.py", tmp_path / "replies.json", tmp_path / "run"
    plugin.write_text(JUDGE)
    script.write_text(json.dumps([reply]))
    status, said = logged(tmp_path, "run", "--plugin", str(plugin), "--selector", "judge", "--bench", "arith",
                          "--limit", "2", "--n", "2", "--model", f"fake:file:{script}", "--out", str(out))  # fmt: skip
    return status, said, out


@pytest.mark.parametrize("reply", ["99", "-1"])
def test_a_reply_naming_no_candidate_is_refused_before_it_is_recorded(tmp_path: Path, reply: str) -> None:
    status, said, out = _judged(tmp_path, reply)
    errors = [line for line in said.splitlines() if line.startswith("error")]
    assert status == 1 and "Traceback" not in said and len(errors) == 1, said
    assert f"the judge selector chose candidate {reply}, which it was not given" in errors[0]
    assert not (out / "results.jsonl").read_text().strip()  # no prediction from no candidate was recorded


def test_a_reply_its_code_cannot_read_names_the_plugins_file_and_line(tmp_path: Path) -> None:
    status, said, _ = _judged(tmp_path, "the second one")
    errors = [line for line in said.splitlines() if line.startswith("error")]
    assert status == 1 and "Traceback" not in said and len(errors) == 1, said
    line = next(n for n, text in enumerate(JUDGE.splitlines(), 1) if "int(reply.text" in text)
    assert f"a plugin failed at {tmp_path / 'judge.py'}:{line}: ValueError" in errors[0]


def test_an_honest_reply_is_the_selection(tmp_path: Path) -> None:
    status, said, out = _judged(tmp_path, "1")
    assert status == 0, said
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert all(r["selection"]["index"] == 1 and r["selection"]["selector"] == "judge" for r in records)


def test_a_plugin_that_fails_to_load_names_its_file_and_line(tmp_path: Path) -> None:
    plugin = tmp_path / "broken.py"
    plugin.write_text("import json\n\n\ndef boom():\n    raise RuntimeError('no')\n\n\nboom()\n")
    status, said = logged(tmp_path, "--plugin", str(plugin), "list")
    assert status == 0 and f"failed to load: RuntimeError: no (at {plugin}:5)" in said, said
    plugin.write_text("x = (\n")
    status, said = logged(tmp_path, "--plugin", str(plugin), "list")
    assert "failed to load: SyntaxError" in said and f"(at {plugin}:1)" in said, said
