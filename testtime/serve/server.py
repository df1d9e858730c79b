"""`serve()`: open a served run, answer requests until a stop signal, write its summary."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from pathlib import Path

from testtime.core.errors import UserError
from testtime.core.secrets import redact_url
from testtime.evaluation.summary import RunSummary
from testtime.methods import Method
from testtime.methods.plan import Plan
from testtime.models.reachable import unreachable
from testtime.run.build import build_method, build_model, check_run_flags, check_sandbox_choice, plan_of
from testtime.run.lifecycle import open_served
from testtime.run.manifest import Effective
from testtime.run.outcome import summarize_served
from testtime.run.settings import RunSettings
from testtime.serve.limits import ServeLimits
from testtime.serve.protocol import served_methods
from testtime.serve.session import ServedRecord, ServedRun

LEARNING = ("ttrl",)  # methods a server runs as one learner over its requests (`serve/learning.py`)


def serve(
    settings: RunSettings,
    out: Path | None,
    *,
    host: str,
    port: int,
    domain: str,
    format_hint: bool,
    api_key: str | None,
    max_requests: int,
    admin_key: str | None = None,
    keepalive_s: float,
    drain_s: float,
    log: Callable[[ServedRecord], None] | None,
    on_ready: Callable[[str, Path], None],
    limits: ServeLimits | None = None,
) -> tuple[RunSummary, Path, bool]:
    """Open a served run, answer requests until a stop signal, then write its summary; it, its path, and whether
    an update's training thread was abandoned at the stop (still inside torch: see `cli/serve.py`)."""
    from testtime.serve.app import ServeApp

    # a served request's samples follow its seed alone: a client that pins `seed` redraws the same samples, and
    # every request without one draws a fresh seed (requests are independent without the problem in the seed)
    settings = settings.model_copy(update={"seeds": "shared"})

    learns = settings.method in LEARNING
    if settings.method not in served_methods() and not learns:
        served = ", ".join(served_methods())
        raise UserError(f"--method {settings.method} cannot be served; choose one of {served}, or {'/'.join(LEARNING)}")
    if learns:  # the requests are a stream it learns from, on math (its vote needs an answer to agree on)
        settings = settings.model_copy(update={"stream": True})
        domain = "math" if domain == "auto" else domain
    check_sandbox_choice(settings)
    method = build_method(settings)  # a bad option fails here, before anything is written
    plan = _plan(method, settings, domain)
    check_run_flags(settings, plan)
    if learns and plan.uses_labels:
        raise UserError("reward=oracle trains on the labels, and a served request has none; use a label-free reward")
    cap = (limits or ServeLimits()).max_calls
    if plan.calls is not None and plan.calls > cap:  # every request that names no method would be a 400
        raise UserError(
            f"--method {settings.method} as configured plans {plan.calls} model calls a request, over "
            f"--max-request-calls {cap}: every request using the defaults would be refused; lower "
            "its --n or options, or raise --max-request-calls"
        )
    model = build_model(settings)
    effective = Effective.of(plan, problems=0)
    learned = (method, plan) if learns else None
    listener = _listen(host, port)  # a port in use fails here, before a run directory exists
    served_as = {"name": "served", "domain": domain, "format_hint": format_hint}
    try:
        _check_upstream(settings.api_base)
        opened = open_served(settings, out, served_as, effective, dict(plan.method), model.describe())
    except BaseException:
        listener.close()  # refused (a live run's lock, another model): the port goes back at once
        raise
    started = time.perf_counter()
    # the lifetimes before this one served too: the summary's wall time is every lifetime's that stopped cleanly
    earlier = opened.directory.read_summary()
    served_before = (earlier.wall_s or 0.0) if earlier is not None else 0.0
    try:
        session = ServedRun(opened, settings, model, domain=domain, format_hint=format_hint, learns=learned)
    except BaseException:
        listener.close()
        opened.release()
        raise
    app = ServeApp(
        session,
        api_key=api_key,
        max_requests=max_requests,
        keepalive_s=keepalive_s,
        log=log,
        limits=limits,
        admin_key=admin_key,
    )

    abandoned = False

    async def main() -> None:
        nonlocal abandoned
        try:
            if session.learning is not None:
                session.learning.warn(session.learning.sent())
                said = await session.learning.open()
                if said:
                    session.learning.warn(said)
            await app.run(listener, lambda url: on_ready(url, opened.directory.path), drain_s)
        finally:
            if session.learning is not None:  # an update in flight stops at its next step, or is abandoned
                abandoned = await session.learning.close(timeout=app.drain_left(drain_s))
            await model.aclose()

    try:
        asyncio.run(main())
    finally:
        session.close()
        wall_s = time.perf_counter() - started + served_before
        summary = summarize_served(opened.directory, settings, effective.n, session.ledger.totals, wall_s)
        opened.release()
        app.disarm()
    return summary, opened.directory.summary_path, abandoned


def _plan(method: Method, settings: RunSettings, domain: str) -> Plan:
    """The server's method planned for its domain; for `auto`, for chat (text) if its selector serves text,
    else math (a request of the other domain is then refused in one line): the plan the manifest records."""
    if domain != "auto":
        return plan_of(method, settings, domain)  # type: ignore[arg-type]
    try:
        return plan_of(method, settings, "text")
    except UserError:
        return plan_of(method, settings, "math")


def _check_upstream(urls: list[str]) -> None:
    """Refused before the first client waits through every retry for a 502 (a fleet routes around a dead few)."""
    if urls and len(dead := unreachable(urls)) == len(urls):
        said = "; ".join(f"{redact_url(url)} ({why})" for url, why in dead.items())
        raise UserError(f"no upstream server is listening: {said}; start it, or check --api-base")


def is_loopback(host: str) -> bool:
    """Whether `host` listens on this machine alone (a name is resolved; 0.0.0.0 and :: are every interface)."""
    import ipaddress

    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return bool(addresses) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)


def _listen(host: str, port: int) -> socket.socket:
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
        listener.listen(1024)
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port} ({exc.strerror or exc}); try another --port") from None
    return listener
