"""`--help` at 80 columns, the width of a new user's first screen: each option's description beside it (or below a
long option) in a column wide enough to read, never rich's ~15-character squeeze; wide terminals keep rich."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer.core

TESTTIME = str(Path(sys.executable).with_name("testtime"))


def _squeezed(text: str) -> list[str]:
    """Lines wider than 80 columns, or whose text starts past column 40 (a description squeezed to the right)."""
    return [line for line in text.splitlines() if len(line) > 80 or len(line) - len(line.lstrip()) > 40]


@pytest.mark.parametrize("command", ["run", "serve"])
def test_the_installed_commands_help_reads_at_80_columns(command: str) -> None:
    done = subprocess.run([TESTTIME, command, "--help"], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "COLUMNS": "80"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "--method <str>" in done.stdout and "│" not in done.stdout
    assert not _squeezed(done.stdout), _squeezed(done.stdout)


def _every_command() -> list[list[str]]:
    from testtime.cli import _register, app

    _register()
    found: list[list[str]] = []

    def walk(command: typer.core.click.Command, path: list[str]) -> None:
        found.append(path)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return found


def test_every_commands_help_reads_at_80_columns(testtime_cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    commands = _every_command()
    assert len(commands) > 15
    for path in commands:
        monkeypatch.setattr(typer.core, "HAS_RICH", True)
        shown = testtime_cli(*path, "--help", env={"COLUMNS": "80"})
        assert shown.returncode == 0 and "Usage:" in shown.stdout, (path, shown.stderr)
        assert "│" not in shown.stdout and not _squeezed(shown.stdout), (path, _squeezed(shown.stdout))


def test_a_wide_terminal_keeps_the_rich_layout(testtime_cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(typer.core, "HAS_RICH", True)
    shown = testtime_cli("serve", "--help", env={"COLUMNS": "160"})
    assert shown.returncode == 0 and "╭─ Options" in shown.stdout
