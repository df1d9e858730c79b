"""Checks a `testtime ...` command line from the docs against the real commands without running it: the
command exists, its flags parse with their types (click's own parser, as typer builds it), and a run's or
serve's method, selector and benchmark options are ones they declare (`run_options`, then each options model)."""

from __future__ import annotations

from typing import Any


def check_command(words: list[str]) -> None:
    import typer

    from testtime.cli import _register, app

    args, plugin = _without_plugins(words)
    _register()
    command: Any = typer.main.get_command(app)
    path: list[str] = []
    while hasattr(command, "commands") and args and args[0] in command.commands:
        path.append(args[0])
        command = command.commands[args.pop(0)]
    shown = "testtime " + " ".join(words)
    assert not hasattr(command, "commands") or "--help" in args, f"{shown}: no such command"
    if "--help" in args or "--version" in args:
        return
    try:
        ctx = command.make_context(" ".join(["testtime", *path]), list(args))
    except Exception as exc:  # noqa: BLE001 - click's usage errors, whatever copy of click raised them
        raise AssertionError(f"{shown}: {exc}") from None
    if plugin:
        return  # a plugin's names are checked where its page runs the command (`<!-- runs -->`)
    params = ctx.params
    if path == ["run"] and not (params.get("resume") or params.get("replay")):
        _method_and_bench(params, ctx.args, params["bench"])
    elif path == ["serve"]:
        _method_and_bench(params, ctx.args, None)
    elif path == ["grade"]:
        from testtime.cli.flags import bench_flags

        bench_flags(params["bench"], ctx.args)


def _method_and_bench(params: dict[str, Any], extra: list[str], bench: str | None) -> None:
    from testtime.benchmarks import options_of
    from testtime.cli.flags import run_options
    from testtime.core.options import parse_options
    from testtime.methods import METHODS

    method = params["method"]
    options, bench_options = run_options(
        method, bench, extra, params.get("method_opt") or [], params.get("selector"), params.get("selector_opt") or []
    )
    METHODS.get(method).Options.parse(options, method)  # type: ignore[attr-defined]
    if bench is not None and bench != "-":
        given = {**parse_options(params.get("bench_opt") or [], "--bench-opt"), **bench_options}
        options_of(bench).parse(given, bench)


def _without_plugins(words: list[str]) -> tuple[list[str], bool]:
    args, plugin, skip = [], False, False
    for word in words:
        if skip:
            skip = False
        elif word == "--plugin":
            plugin = skip = True
        elif word.startswith("--plugin="):
            plugin = True
        else:
            args.append(word)
    return args, plugin
