"""mkdocs hook: the CLI reference page is generated from the commands themselves (their click objects, as
typer builds them), so a flag added, renamed or removed changes the docs with it. A page holding the marker
`<!-- cli-reference -->` gets one section per command: its help, and a table of its arguments and options."""

from __future__ import annotations

from typing import Any

MARKER = "<!-- cli-reference -->"


def on_page_markdown(markdown: str, **_: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, cli_reference())


def cli_reference() -> str:
    import typer

    from testtime.cli import _register, app

    _register()
    root = typer.main.get_command(app)
    sections: list[str] = []

    def walk(command: Any, path: list[str]) -> None:
        if hasattr(command, "commands"):  # a group (typer carries its own copy of click: no isinstance)
            sections.append(_section(command, path))  # the root's: the options every command takes
            for name in sorted(command.commands):
                walk(command.commands[name], [*path, name])
            return
        sections.append(_section(command, path))

    walk(root, [])
    return "\n\n".join(sections)


def _section(command: Any, path: list[str]) -> str:
    title = " ".join(["testtime", *path])
    text = (command.help or "").strip()
    lines = [f"## `{title}`", "", _escape(text), ""]
    rows = []
    for param in command.params:
        if param.param_type_name == "argument":
            rows.append(("`" + (param.name or "").upper() + "`", "argument", getattr(param, "help", "") or ""))
            continue
        if param.hidden or param.name == "help":
            continue
        names = ", ".join(f"`{opt}`" for opt in [*param.opts, *param.secondary_opts])
        default = "" if param.default in (None, False, (), []) or param.is_flag else f" (default `{param.default}`)"
        rows.append((names, "flag" if param.is_flag else "option", (param.help or "") + default))
    if rows:
        lines += ["| name | kind | what |", "|---|---|---|"]
        lines += [f"| {name} | {kind} | {' '.join(_escape(what).split())} |" for name, kind, what in rows]
    if command.epilog:
        lines += ["", _escape(command.epilog.strip())]
    return "\n".join(lines)


def _escape(text: str) -> str:
    """Help text as Markdown: pipes would split a table cell, `<...>` would be read as HTML."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;").strip()
