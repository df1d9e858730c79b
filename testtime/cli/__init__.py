"""The `testtime` command. Each file here holds a group of commands (`run.py`: run, grade, list;
`experiments.py`: ablate, report, view, export; `serve.py`; `ttrl.py`; `sandbox.py`), `settings.py` the run
settings they share, `flags.py` a method's and a benchmark's own flags, `display.py` what the terminal shows.
A user's mistake is one line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import sqlite3
import sys
from typing import Annotated, Any

import typer

from testtime.core.errors import PlanError, UserError, storage_failure

app = typer.Typer(
    help="Make a language model better at a set of problems at test time, without labels.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"testtime {version('testtime')}")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version and exit")
    ] = False,
    plugin: Annotated[
        list[str] | None,
        typer.Option(
            "--plugin",
            help="a Python file that registers methods, rewards, selectors, benchmarks or model providers "
            "(repeatable; also after the command). Installed packages register through the `testtime` entry "
            "point group.",
        ),
    ] = None,
) -> None:
    """Make a language model better at a set of problems at test time, without labels."""


def _register(args: list[str] | None = None) -> None:
    """The commands, registered once a process; the help of `run` and `serve` lists every method's flags, which
    loads the plugins, so it is made only when that command is the one `args` ask for (`--help` loads none;
    None: every help, as the docs' CLI reference shows it)."""
    command = None if args is None else next((a for a in args if not a.startswith("-")), "")
    if not app.registered_commands:  # main() may be called twice in one process (tests, the API)
        _add_commands()
    from testtime.cli.run import run_help
    from testtime.cli.serve import serve_help

    for info in app.registered_commands:
        if info.name == "run":
            info.epilog = run_help() if command in (None, "run") else None
        elif info.name == "serve":
            info.epilog = serve_help() if command in (None, "serve") else None


def _add_commands() -> None:
    from testtime.cli.experiments import ablate_app, export_command, report_command, runs_command, view_command
    from testtime.cli.run import grade_command, list_command, merge_command, run_command
    from testtime.cli.sandbox import sandbox_app
    from testtime.cli.serve import serve_command
    from testtime.cli.ttrl import ttrl_app

    extra_args = {"allow_extra_args": True, "ignore_unknown_options": True}
    app.command("run", context_settings=extra_args)(run_command)
    app.command("grade", context_settings=extra_args)(grade_command)
    app.command("merge")(merge_command)
    app.command("list")(list_command)
    app.command("serve", context_settings=extra_args)(serve_command)
    app.add_typer(sandbox_app, name="sandbox")
    app.add_typer(ablate_app, name="ablate")
    app.add_typer(ttrl_app, name="ttrl")
    app.command("report")(report_command)
    app.command("view")(view_command)
    app.command("runs")(runs_command)
    app.command("export")(export_command)


# Below this width rich's option table squeezes each description into a column of ~15 characters: click's
# plain layout (each description beside its option, or below it when the option is long) reads at 80 columns.
RICH_HELP_MIN_COLUMNS = 120


def _plain_help_when_narrow() -> None:
    import shutil

    import typer.core

    typer.core.HAS_RICH = typer.core.HAS_RICH and shutil.get_terminal_size().columns >= RICH_HELP_MIN_COLUMNS


def main(argv: list[str] | None = None) -> Any:
    _plain_help_when_narrow()
    try:
        args = _take_plugins(list(sys.argv[1:] if argv is None else argv))
        _register(args)  # after the plugin files are known: `run --help` lists their flags
        return app(args=args, standalone_mode=True)
    except UserError as exc:
        typer.secho(f"error: {exc}", fg="red", err=True)
        sys.exit(2)
    except PlanError as exc:  # the method's bug (a plugin's, mostly): one line, before that call was paid
        typer.secho(f"error: the method broke its plan: {exc}", fg="red", err=True)
        sys.exit(1)
    except (OSError, sqlite3.OperationalError) as exc:
        if not storage_failure(exc):
            _plugin_failure(exc)
            raise
        typer.secho(
            f"error: cannot write: {exc}; free some space (or fix the folder) and run again", fg="red", err=True
        )
        sys.exit(2)
    except Exception as exc:
        _plugin_failure(exc)
        raise


def _plugin_failure(exc: Exception) -> None:
    """A plugin's own code failed (its selector, its method): one line naming its file and line, exit 1; the
    traceback with TESTTIME_TRACEBACK=1. Anything else is ours, and keeps its traceback."""
    import os

    from testtime.core.plugins import plugin_line

    where = plugin_line(exc)
    if where is None or os.environ.get("TESTTIME_TRACEBACK"):
        return
    typer.secho(
        f"error: a plugin failed at {where}: {type(exc).__name__}: {exc} (TESTTIME_TRACEBACK=1 shows the traceback)",
        fg="red",
        err=True,
    )
    sys.exit(1)


def _take_plugins(args: list[str]) -> list[str]:
    """`--plugin FILE` wherever it stands: loaded before the commands are built, so their help and names
    include what the file registers; given to the root command only, where it is declared."""
    from testtime.core.plugins import use_plugin_files

    files: list[str] = []
    rest: list[str] = []
    tokens = iter(args)
    for token in tokens:
        if token == "--":
            rest += [token, *tokens]
            break
        if token == "--plugin":
            value = next(tokens, None)
            if value is None:
                raise UserError("--plugin needs a file")
            files.append(value)
        elif token.startswith("--plugin="):
            files.append(token.partition("=")[2])
        else:
            rest.append(token)
    if files:
        use_plugin_files(files)
    return rest
