"""`testtime serve`: answer OpenAI-compatible chat requests with a test-time method over an upstream model."""

from __future__ import annotations

import math
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from testtime.cli.shared_flags import SharedFlags, run_settings
from testtime.core.errors import UserError
from testtime.serve.limits import ServeLimits

Opt = typer.Option


def serve_help() -> str:
    """The served methods' own flags, for the epilog of `serve --help`."""
    from testtime.cli.flags import help_text
    from testtime.methods import METHODS
    from testtime.serve.protocol import served_methods
    from testtime.serve.server import LEARNING

    names = [*served_methods(), *LEARNING]
    owners = {f"--method {name}": METHODS.get(name).Options for name in names}  # type: ignore[attr-defined]
    return help_text(
        owners,
        "Method flags (every option also as --method-opt KEY=VALUE; a request may set its own; --method ttrl's "
        "serving options, gate, gate_probe, keep_weights, max_client_share, update_every, window, weights: "
        "`testtime list`):",
    )


NOT_SERVED = ("bench", "limit", "data_dir", "bench_opt")


# Upstream calls in flight across all requests: 16 (a run's default) would queue a few concurrent majority-8s.
@run_settings(exclude=NOT_SERVED, defaults={"concurrency": 64})
def serve_command(
    ctx: typer.Context,
    method: Annotated[
        str,
        Opt(
            help="the method a request gets unless it names one (any method that answers one problem at a time); "
            "ttrl: every request answered by weights that train on the requests in the background, each update gated "
            "before it answers (--method-opt preset=cpu --method-opt update_every=8; see docs/serving.md)"
        ),
    ] = "majority",
    method_opt: Annotated[list[str] | None, Opt("--method-opt", help="method option KEY=VALUE, repeatable")] = None,
    selector: Annotated[
        str | None, Opt(help="a registered selector (`testtime list`; default: by method and domain)")
    ] = None,
    selector_opt: Annotated[list[str] | None, Opt("--selector-opt", help="selector option KEY=VALUE")] = None,
    host: Annotated[str, Opt(help="address to listen on (0.0.0.0 exposes it to the network)")] = "127.0.0.1",
    port: Annotated[int, Opt(help="port (0: any free one, printed)")] = 8000,
    domain: Annotated[
        str,
        Opt(
            help="auto | math | code | text: how a request is solved unless it says (testtime.domain). auto: by "
            "its words, math when it asks for a box, writes mathematics or asks to compute, else text; text: any "
            "chat, sent upstream as written, the reply chosen among whole replies (medoid; --selector usc asks "
            "the model); math: a \\boxed{} answer asked for and voted on"
        ),
    ] = "auto",
    format_hint: Annotated[
        bool, Opt("--format-hint/--no-format-hint", help="math: ask for a \\boxed{} answer when the client did not")
    ] = True,
    api_key: Annotated[
        str | None,
        Opt(envvar="TESTTIME_SERVE_API_KEY", help="clients must send this bearer key ($TESTTIME_SERVE_API_KEY)"),
    ] = None,
    admin_key: Annotated[
        str | None,
        Opt(
            envvar="TESTTIME_SERVE_ADMIN_KEY",
            help="--method ttrl: the bearer key of POST /v1/testtime/weights, which moves the serving weights to a "
            "kept version or the base model; never the clients' key ($TESTTIME_SERVE_ADMIN_KEY)",
        ),
    ] = None,
    max_requests: Annotated[int, Opt(help="requests answered at once; more wait their turn", min=1)] = 64,
    keepalive: Annotated[
        float, Opt(help="stream: seconds between keep-alive comments while the method runs", min=0.01)
    ] = 5.0,
    drain_timeout: Annotated[float, Opt(help="on Ctrl-C or SIGTERM: seconds requests in flight may finish")] = 60.0,
    max_request_calls: Annotated[
        int, Opt(help="most model calls a request's method may plan (majority-N: N; TRT: rounds x rollouts...)", min=1)
    ] = ServeLimits.max_calls,
    max_messages: Annotated[int, Opt(help="most messages in a request", min=1)] = ServeLimits.max_messages,
    max_body_mb: Annotated[float, Opt(help="largest request body, in MB (413 over it)", min=0.001)] = (
        ServeLimits.max_body_mb
    ),
    header_timeout: Annotated[
        float, Opt(help="seconds a connection has to send a complete request (slow clients are cut)", min=0.1)
    ] = ServeLimits.header_timeout_s,
    idle_timeout: Annotated[float, Opt(help="seconds a kept-alive connection may idle between requests", min=0.1)] = (
        ServeLimits.idle_timeout_s
    ),
    body_timeout: Annotated[
        float, Opt(help="seconds a request's body has to arrive after its headers (a slow body is cut: 408)", min=0.1)
    ] = ServeLimits.body_timeout_s,
    code_requests: Annotated[
        bool | None,
        Opt(
            "--code-requests/--no-code-requests",
            help="may a request ask for the code domain (programs run in the sandbox)? default: with --domain code",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        Opt(help="run directory (default runs/<time>-serve-<method>-requests-<model>); a served run's continues it"),
    ] = None,
    *,
    flags: SharedFlags,
) -> None:
    """Serve POST /v1/chat/completions and GET /v1/models: each request's conversation is one problem, solved by
    the method over the upstream --model; the reply is the selected completion, its usage every upstream call,
    and a `testtime` field (candidates, vote share, TRT rounds, confidence, cost). A request picks its method by
    the model name (majority-8/MODEL, trt-4x2/MODEL, rsa-8x3/MODEL, single/MODEL) or a body field
    {"testtime": {"method", "options", "n", "domain"}}. Everything goes to a run directory (`testtime view`).
    With --method ttrl the endpoint learns from its requests without labels: each is answered by the current
    weights (the reply's model names them, MODEL+ttrl@STEPS), and every update_every requests an update trains
    in the background; `testtime grade --run` grades the run once labels are known, `testtime report` reads it.
    """
    from testtime.cli.display import console, show_model_notices
    from testtime.cli.flags import run_options
    from testtime.serve.protocol import DOMAIN_CHOICES
    from testtime.serve.server import is_loopback, serve
    from testtime.serve.session import ServedRecord

    if domain not in DOMAIN_CHOICES:
        raise UserError(f"--domain must be auto, math, code or text, not '{domain}'")
    if admin_key is not None and (not admin_key.strip() or admin_key == api_key):
        raise UserError("--admin-key must be a key of its own: not empty, and never the clients' --api-key")
    if not 0 <= port <= 65535:
        raise UserError(f"--port must be 0-65535 (0: any free one), not {port}")
    seconds = {"--keepalive": keepalive, "--drain-timeout": drain_timeout, "--max-body-mb": max_body_mb}
    seconds |= {"--header-timeout": header_timeout, "--idle-timeout": idle_timeout, "--body-timeout": body_timeout}
    for name, value in seconds.items():
        if not math.isfinite(value) or value < 0:
            raise UserError(f"{name} must be a finite number of at least 0, not {value}")
    limits = ServeLimits(
        max_calls=max_request_calls,
        max_messages=max_messages,
        max_body_mb=max_body_mb,
        header_timeout_s=header_timeout,
        idle_timeout_s=idle_timeout,
        body_timeout_s=body_timeout,
        code_requests=domain == "code" if code_requests is None else code_requests,
    )
    method_options, _ = run_options(method, None, ctx.args, method_opt or [], selector, selector_opt or [])
    settings = flags.settings(method, method_options, bench="served")

    def ready(url: str, path: Path) -> None:
        console.print(f"run directory: [bold]{escape(str(path))}[/bold]", soft_wrap=True)
        typer.echo(f"serving {settings.model} with {method} at {url} (Ctrl-C stops)", err=True)
        typer.echo(url)  # on stdout alone: a script reads the address from here (with --port 0)

    outcomes: Counter[str] = Counter()

    def log(record: ServedRecord) -> None:
        """One line a request on stderr (`--quiet`: none): what ran, how it went, what it cost."""
        outcomes[record.status] += 1
        if flags.quiet:
            return
        cost = "-" if record.cost_usd is None else f"${record.cost_usd:.4f}"
        outcome = record.status if record.error is None else f"{record.status}: {record.error[:160]}"
        sys.stderr.write(
            f"{record.id} {record.method['name']} {record.calls} calls "
            f"{record.prompt_tokens + record.completion_tokens} tokens {cost} {record.latency_s:.2f}s {outcome}\n"
        )

    if api_key is None and not is_loopback(host):
        typer.echo(
            f"warning: serving on {host} without --api-key: anyone who reaches this port spends your model's "
            "budget (set --api-key or $TESTTIME_SERVE_API_KEY)",
            err=True,
        )
    if not flags.quiet:
        show_model_notices()  # a local model loads on the first request
    summary, summary_path, abandoned = serve(
        settings,
        out,
        host=host,
        port=port,
        domain=domain,
        format_hint=format_hint,
        api_key=api_key,
        admin_key=admin_key,
        max_requests=max_requests,
        keepalive_s=keepalive,
        drain_s=drain_timeout,
        log=log,
        on_ready=ready,
        limits=limits,
    )
    # what the clients got: a failed request (502) or one the budget stopped (503) was answered with an error
    failed = outcomes["failed"] + outcomes["stopped"]
    console.print(
        f"stopped: {sum(outcomes.values())} requests ({failed} answered with an error); the run, every lifetime "
        f"on this --out: {summary.problems} answered, {summary.ledger.calls} upstream calls; summary: {summary_path}",
        soft_wrap=True,
    )
    if abandoned:  # everything is written; the interpreter's exit would kill that thread inside torch (an abort)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
