"""`testtime sandbox build | check | clean | exec`: the sandbox image, what isolation holds here, the leftovers
of killed runs, and running a program."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from testtime.core.errors import UserError

sandbox_app = typer.Typer(help="Build, check and use the code sandbox.", no_args_is_help=True)
Opt = typer.Option


@sandbox_app.command()
def build(
    tag: Annotated[str, Opt(help="image tag")] = "testtime-sandbox:py311",
    source: Annotated[str, Opt(help="auto | registry (slim Python image) | debian (offline debootstrap)")] = "auto",
) -> None:
    """Build the Docker sandbox image (offline from Debian packages when no registry answers)."""
    from testtime.cli.display import console
    from testtime.sandbox.image import build_image

    if source not in ("auto", "registry", "debian"):
        raise UserError(f"--source must be auto, registry or debian, not '{source}'")
    build_image(tag, source, log=console.print)


@sandbox_app.command()
def check(
    sandbox: Annotated[str, Opt(help="all | docker | bwrap")] = "all",
) -> None:
    """Run the isolation probes on each available backend and print what holds."""
    from rich.table import Table

    from testtime.cli.display import console, results_console
    from testtime.sandbox import SandboxError
    from testtime.sandbox.choose import open_sandbox
    from testtime.sandbox.probes import PROBES, plant_secret, run_probe

    names = ["docker", "bwrap"] if sandbox == "all" else [sandbox]
    _list_leftovers(console)
    plant_secret()
    table = Table("property", *names)
    columns: dict[str, list[str]] = {}
    for name in names:
        try:
            backend = open_sandbox(name, pool_size=1)  # one worker: two-job probes meet the same sandbox
        except SandboxError as exc:
            console.print(f"[yellow]{name}: unavailable: {exc}[/yellow]")
            columns[name] = ["unavailable"] * len(PROBES)
            continue
        with backend:
            columns[name] = []
            for probe in PROBES:
                held, report = run_probe(backend, probe)
                seen = ", ".join(t.verdict for t in report.tests)
                columns[name].append("[green]holds[/green]" if held else f"[red]FAILS[/red] ({seen})")
        if name == "bwrap":
            from testtime.sandbox.cgroups import hierarchy

            kind = hierarchy()
            started_as = "uid 65534 (dropped from root)" if os.geteuid() == 0 else f"uid {os.geteuid()}"
            limits = (
                f"memory/pids/CPU limits on (cgroup {kind})"
                if kind
                else "[red]no memory/pids limits[/red] (no writable cgroup hierarchy); CPU by the harness's throttle"
            )
            console.print(f"bwrap: {limits}; started as {started_as}")
    for i, probe in enumerate(PROBES):
        table.add_row(probe.name, *(columns[n][i] for n in names))
    results_console.print(table)


def _docker_or_none() -> Any:
    from testtime.sandbox import SandboxError
    from testtime.sandbox.docker_backend import docker_client

    try:
        return docker_client()
    except SandboxError:
        return None


def _list_leftovers(console: Any) -> None:
    from testtime.sandbox.owner import leftovers

    found = leftovers(_docker_or_none())
    if not found:
        console.print("no sandbox leftovers")
        return
    console.print(
        f"[yellow]{len(found)} sandbox resource(s) exist[/yellow] (`testtime sandbox clean` removes the dead):"
    )
    for leftover in found:
        console.print(f"  {leftover.describe()}", soft_wrap=True)


@sandbox_app.command()
def clean(
    all_owners: Annotated[bool, Opt("--all", help="also remove those of live runs (they will fail)")] = False,
) -> None:
    """Remove containers, cgroups and temp folders left by killed runs (owner gone, or unknown)."""
    from testtime.cli.display import console
    from testtime.sandbox.owner import reap

    states = ("dead", "unknown", "live") if all_owners else ("dead", "unknown")
    removed = reap(_docker_or_none(), states)
    for leftover in removed:
        console.print(f"removed {leftover.describe()}", soft_wrap=True)
    console.print(f"removed {len(removed)} leftover(s)")


@sandbox_app.command("exec")
def exec_program(
    program: Annotated[Path, typer.Argument(help="the program file (Python)")],
    tests: Annotated[Path, Opt(help='JSON list of {"input", "output", "testtype"}')],
    func_name: Annotated[str | None, Opt(help="method of class Solution for functional tests")] = None,
    sandbox: Annotated[str, Opt(help="auto | docker | bwrap")] = "auto",
    timeout: Annotated[float, Opt(help="per-test time limit, seconds")] = 6.0,
    early_exit: Annotated[bool, Opt(help="stop at the first failing test")] = False,
    grader: Annotated[str, Opt(help="lenient | official (LiveCodeBench's comparison and call semantics)")] = "lenient",
    as_json: Annotated[bool, Opt("--json", help="print one JSON object")] = False,
) -> None:
    """Run a program against tests in the sandbox and print the verdicts."""
    from pydantic import ValidationError
    from rich.table import Table

    from testtime.cli.display import results_console
    from testtime.core.records import TestCase
    from testtime.sandbox import Limits
    from testtime.sandbox.choose import CHOICES, open_sandbox

    if sandbox not in CHOICES:
        raise UserError(f"--sandbox must be one of {', '.join(CHOICES)}, not '{sandbox}'")
    if grader not in ("lenient", "official"):
        raise UserError(f"--grader must be lenient or official, not '{grader}'")
    if not 0 < timeout < 3600:  # nan and inf fail this too
        raise UserError(f"--timeout must be a number of seconds in (0, 3600), not {timeout}")
    try:
        source = program.read_text()
        raw = json.loads(tests.read_text())
        cases = [TestCase(**case) for case in raw]
    except OSError as exc:
        raise UserError(f"cannot read {exc.filename}: {exc.strerror}") from None
    except (json.JSONDecodeError, TypeError, ValidationError) as exc:
        shape = "a JSON list of {input, output, testtype}"
        raise UserError(f"{tests}: expected {shape} ({type(exc).__name__})") from None
    if not cases:
        raise UserError(f"{tests} holds no tests: an empty suite proves nothing")
    with open_sandbox(sandbox) as box:
        limits = Limits(timeout_s=timeout, early_exit=early_exit, grader=grader)  # type: ignore[arg-type]
        report = box.run(source, cases, limits, func_name=func_name)
    if as_json:
        typer.echo(
            json.dumps(
                {"backend": report.backend, "passed": report.passed, "tests": [t.model_dump() for t in report.tests]}
            )
        )
        return
    table = Table("test", "verdict", "seconds", "error", title=f"{program} on {report.backend}")
    for i, verdict in enumerate(report.tests):
        table.add_row(str(i), verdict.verdict, f"{verdict.seconds:.3f}", verdict.error or "")
    results_console.print(table)
    results_console.print("[green]all passed[/green]" if report.passed else "[red]not all passed[/red]")
