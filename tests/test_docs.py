"""The docs site and the README hold as written:

- the site builds with `mkdocs build --strict` (a broken link, anchor or API reference fails);
- every `python` block runs (a page's blocks in order, in one fresh interpreter, in a scratch folder; a block
  titled `title="NAME.py"` is written to that file instead, for the blocks after it to use);
- every `testtime ...` line of a `bash` block parses against the real commands: the command exists, each
  flag is one it (or the chosen method or benchmark) declares, each value has its type, each `--method-opt`
  and `--bench-opt` names an option; a block preceded by `<!-- runs -->` is run in full, offline.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])
SERVED = "http://127.0.0.1:8000/v1"  # where the serving pages' clients find `testtime serve`
FENCE = re.compile(r"(?P<runs><!-- runs -->\n)?^```(?P<info>[^\n]*)\n(?P<body>.*?)^```$", re.M | re.S)


@dataclass
class Block:
    page: Path
    line: int
    language: str
    title: str | None
    body: str
    runs: bool


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        info = match["info"].strip()
        title = re.search(r'title="([^"]+)"', info)
        found.append(
            Block(
                page, text[: match.start("body")].count("\n") + 1, info.split(" ")[0] if info else "",
                title[1] if title else None, match["body"], bool(match["runs"]),
            )
        )  # fmt: skip
    return found


def _name(page: Path) -> str:
    return str(page.relative_to(REPO))


def commands_in(body: str) -> list[list[str]]:
    """Each `testtime ...` (or `.venv/bin/testtime ...`) command of a shell block, continuations joined and
    comments dropped, up to a shell operator."""
    commands = []
    for line in body.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words and words[0] in ("testtime", ".venv/bin/testtime"):
            cut = next((i for i, w in enumerate(words) if w in ("&&", "||", ";", "|", ">", "&")), len(words))
            commands.append(words[1:cut])
    return commands


def test_the_site_builds_in_strict_mode(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).parent / "mkdocs"
    if not mkdocs.exists():
        pytest.skip("mkdocs is not installed (pip install 'testtime[docs]')")
    built = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    cli = (tmp_path / "site" / "cli" / "index.html").read_text()
    for command in ("testtime-run", "testtime-serve", "testtime-ttrl-verl", "testtime-sandbox-check"):
        assert f'id="{command}"' in cli  # the reference is generated from every command
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    assert "run_method" in api and "GroupReward" in api


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], None]]:
    """Starts, on first call, the one server every serving page's clients talk to; stops it after the module."""
    started: list[subprocess.Popen[bytes]] = []

    def ensure() -> None:
        if not started:
            started.append(_serve_embedded(tmp_path_factory.mktemp("served")))

    yield ensure
    for server in started:
        server.terminate()
        server.wait(timeout=60)


@pytest.mark.parametrize("page", [p for p in PAGES if any(b.language == "python" for b in blocks(p))], ids=_name)
def test_python_blocks_run(page: Path, tmp_path: Path, served: Callable[[], None]) -> None:
    # the first hour reads the runs the quickstart made: make one, as it would
    script = ["import testtime; testtime.run_method('majority', model='fake:echo', n=2, limit=3, out='runs/first')"]
    for block in blocks(page):
        if block.language != "python":
            continue
        if block.title:
            (tmp_path / block.title).write_text(block.body)
            continue
        script.append(f"# {_name(page)}:{block.line}\n{block.body}")
    if SERVED in "".join(script):
        served()
    ran = subprocess.run(
        [sys.executable, "-c", "\n".join(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert ran.returncode == 0, ran.stderr[-3000:]


def _serve_embedded(folder: Path) -> subprocess.Popen[bytes]:
    """The server the serving pages' clients talk to: `testtime serve` on the embedded model, at the address
    they use, its answers kept short."""
    import time
    import urllib.request

    command = [sys.executable, "-m", "testtime.cli", "serve", "--port", SERVED.rsplit(":", 1)[1].split("/")[0],
               "--max-tokens", "8", "--out", str(folder / "served"), "--quiet"]  # fmt: skip
    server = subprocess.Popen(command, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 180
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(f"{SERVED}/models", timeout=2):
                return server
        except OSError:
            time.sleep(0.5)
    server.kill()
    raise AssertionError("testtime serve did not answer within 180 s")


def _shell_blocks() -> list[Block]:
    return [b for p in PAGES for b in blocks(p) if b.language in ("bash", "sh", "console") and commands_in(b.body)]


@pytest.mark.parametrize("block", _shell_blocks(), ids=lambda b: f"{_name(b.page)}:{b.line}")
def test_shell_commands_parse_against_the_real_cli(block: Block) -> None:
    from tests.docs_cli import check_command

    for words in commands_in(block.body):
        check_command(words)


@pytest.mark.parametrize(
    "block", [b for p in PAGES for b in blocks(p) if b.runs], ids=lambda b: f"{_name(b.page)}:{b.line}"
)
def test_blocks_marked_runs_run_offline(block: Block, tmp_path: Path) -> None:
    for earlier in blocks(block.page):  # the files the page wrote before this block
        if earlier.title and earlier.line < block.line:
            (tmp_path / earlier.title).write_text(earlier.body)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    ran = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.body], cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env=env,
    )  # fmt: skip
    assert ran.returncode == 0, (ran.stdout[-2000:], ran.stderr[-2000:])
