"""The HTTP side of `testtime serve`: `POST /v1/chat/completions` and `/v1/completions` (legacy: each prompt a
one-turn chat), `GET /v1/models`, `GET /health` (aiohttp); `/v1/responses` is refused with what to use instead.

Every request runs as its own task, so a slow one never blocks others; the shared engine bounds the upstream
calls in flight, `max_requests` the requests being answered (more wait their turn). `stream: true` gets
server-sent events: keep-alive comments while the method runs (clients and proxies would time out on a silent
TRT), then the selected answer, the usage and `[DONE]`. A stop (Ctrl-C, SIGTERM) closes the listener, lets
the requests in flight finish (`drain_s`), then writes the run's summary. Past the drain every client still
waiting gets a 503, no new upstream call starts, and calls in flight have `LAND_S` to land in the ledger (a
call cancelled after that still gets its line, tokens unknown); a watchdog ends the process if the stop has
not finished `STOP_GRACE_S` after the drain (an event loop too busy to see the signal).
What a client may ask and how long it may take is bounded (`limits.py`); every error is an OpenAI-shaped JSON
body, whatever its status.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
import signal
import socket
import sqlite3
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from aiohttp import web

from testtime.core.errors import RunStopped, UserError, storage_failure
from testtime.serve.limits import ServeLimits, sweep_connections
from testtime.serve.protocol import (
    BadRequest,
    ServedRequest,
    chunk_body,
    completion_body,
    cut_at_stop,
    error_body,
    models_body,
    parse_completions,
    parse_request,
    text_completion_body,
)
from testtime.serve.session import Answered, PlannedRequest, ServedRecord, ServedRun

T = TypeVar("T")
KEEPALIVE_S = 5.0
STOP_GRACE_S = 15.0
LAND_S = 10.0  # after the drain: what calls in flight have to land in the ledger (within STOP_GRACE_S)
SHUT_DOWN = "the server shut down before this request was answered; send it again"
ERROR_CODES = {
    401: "invalid_api_key",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    413: "request_too_large",
}


class ServeApp:
    def __init__(
        self,
        served: ServedRun,
        api_key: str | None = None,
        max_requests: int = 64,
        keepalive_s: float = KEEPALIVE_S,
        log: Callable[[ServedRecord], None] | None = None,
        limits: ServeLimits | None = None,
        admin_key: str | None = None,
    ) -> None:
        self.served, self.api_key, self.keepalive_s, self.log = served, api_key, keepalive_s, log
        self.admin_key = admin_key
        self.limits = limits or ServeLimits()
        self.model = served.settings.model
        self._slots = asyncio.Semaphore(max_requests)
        self.in_flight: set[asyncio.Task[Answered]] = set()
        self.answering: set[asyncio.Task[Answered]] = set()  # in flight and past the slots (not waiting)
        self.draining = False
        self.stopped_at: float | None = None  # when a stop signal came (the drain's clock)
        self.cannot_write: str | None = None  # the last failed write of a request's records, until one succeeds
        self.stop_timer: threading.Timer | None = None  # armed by a stop signal; `disarm` once all is written
        self.app = web.Application(client_max_size=self.limits.max_body_bytes, middlewares=[self._errors])
        self.app.router.add_post("/v1/chat/completions", self.chat)
        self.app.router.add_post("/v1/completions", self.completions)
        self.app.router.add_post("/v1/responses", self.responses)
        self.app.router.add_get("/v1/models", self.models)
        self.app.router.add_get("/health", self.health)
        self.app.router.add_post("/v1/testtime/weights", self.weights)

    @web.middleware
    async def _errors(self, request: web.Request, handler: Callable[..., Any]) -> web.StreamResponse:
        """Every failure is an OpenAI-shaped error body; a wrong path or verb too."""
        try:
            return await handler(request)
        except BadRequest as exc:
            return _error(str(exc), exc.status, exc.code)
        except web.HTTPException as exc:
            code = ERROR_CODES.get(exc.status, "invalid_request_error" if exc.status < 500 else "server_error")
            return _error(f"{request.method} {request.path}: {exc.reason}", exc.status, code)
        except ConnectionResetError:  # the client hung up mid-request: theirs, not an error of ours
            sys.stderr.write(f"client hung up on {request.method} {request.path}\n")
            return _error("the client closed the connection", 499, "client_closed_request")
        except (OSError, sqlite3.OperationalError) as exc:
            if not storage_failure(exc):
                raise
            return self._cannot_write(exc)
        except Exception as exc:  # noqa: BLE001 - a bug of ours is still a JSON error, and the server goes on
            sys.stderr.write(f"internal error on {request.method} {request.path}: {type(exc).__name__}: {exc}\n")
            return _error(f"internal error ({type(exc).__name__})", 500, "server_error")

    def _cannot_write(self, exc: BaseException) -> web.Response:
        """The run directory's disk failed (full, over quota, past a file-size limit): the request is a 507 and the
        server goes on; what was recorded before stays. Said once on the console, and in /health, until a request
        is recorded again."""
        if self.cannot_write is None:
            sys.stderr.write(
                f"error: cannot write to {self.served.directory.path}: {exc}. Requests are refused (507) until "
                "space is freed; every request recorded before is kept\n"
            )
        self.cannot_write = str(exc)
        return _error(
            f"the server cannot record this request ({exc}): nothing was answered; try again once it has space",
            507,
            "insufficient_storage",
        )

    def _wrote(self) -> None:
        """A request was recorded: writing works again (said once, if it had failed)."""
        if self.cannot_write is not None:
            sys.stderr.write("writing again: requests are recorded and answered\n")
            self.cannot_write = None

    def drain_left(self, drain_s: float) -> float:
        """What is left of the drain timeout since the stop signal (all of it before one)."""
        return drain_s if self.stopped_at is None else max(0.0, drain_s - (time.monotonic() - self.stopped_at))

    def disarm(self) -> None:
        """The stop finished (summary written): the watchdog need not end the process."""
        if self.stop_timer is not None:
            self.stop_timer.cancel()

    def _authorised(self, request: web.Request) -> None:
        """Only `Authorization: Bearer KEY` (the scheme case-insensitive, as RFC 6750), compared in constant time."""
        if self.api_key is None:
            return
        given = _bearer(request)
        if given is None or not hmac.compare_digest(given.encode(), self.api_key.encode()):
            raise BadRequest("invalid or missing API key (send Authorization: Bearer KEY)", 401, "invalid_api_key")

    async def models(self, request: web.Request) -> web.Response:
        self._authorised(request)
        learning = self.served.learning
        kept = learning.background.kept_names() if learning is not None else None
        return web.json_response(models_body(self.model, prefixes=learning is None, kept=kept))

    async def weights(self, request: web.Request) -> web.Response:
        """`POST /v1/testtime/weights {"weights": "base" | STEPS | "MODEL+ttrl@STEPS"}`: an operator moves the
        serving weights of a learning server to a kept version or the base model. Its own key (`--admin-key`),
        never a client's: 401 without one, 403 with another."""
        given = _bearer(request)
        if self.admin_key is None:
            raise BadRequest("no --admin-key was set: the serving weights cannot be moved on this server", 403)
        if not given:
            raise BadRequest("the admin route needs Authorization: Bearer ADMIN_KEY", 401, "invalid_api_key")
        if not hmac.compare_digest(given.encode(), self.admin_key.encode()):
            raise BadRequest("not the admin key", 403, "permission_denied")
        if self.served.learning is None:
            raise BadRequest("this server does not learn: it has no weights to move", 404, "not_found")
        try:
            body = json.loads(await asyncio.wait_for(request.read(), self.limits.body_timeout_s) or b"{}")
        except (ValueError, TimeoutError):
            raise BadRequest('the body must be JSON: {"weights": "base" | STEPS | "MODEL+ttrl@STEPS"}') from None
        asked = body.get("weights") if isinstance(body, dict) else None
        if not isinstance(asked, str | int) or isinstance(asked, bool):
            raise BadRequest('\'weights\' must name kept weights: "base", STEPS or "MODEL+ttrl@STEPS"')
        try:
            name = await self.served.learning.move(str(asked))
        except UserError as exc:
            raise BadRequest(str(exc), 404, "not_found") from None
        sys.stderr.write(f"the serving weights were moved to {name} (admin)\n")
        return web.json_response({"weights": name})

    async def health(self, request: web.Request) -> web.Response:
        status = "draining" if self.draining else "cannot_write" if self.cannot_write else "ok"
        body: dict[str, Any] = {"status": status, "in_flight": len(self.in_flight)}
        if self.cannot_write is not None:
            body["cannot_write"] = self.cannot_write
        if self.served.learning is not None:
            body["learning"] = self.served.learning.health()
        return web.json_response(body)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        raw = await self._read(request)
        parsed = await asyncio.to_thread(self._parse, raw, parse_request)  # a large body never stalls the others
        request_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        task = await self._start(parsed, request_id, client_of(request, parsed))
        if parsed.stream:
            return await self._stream(request, parsed, request_id, task)
        answered = await _outcome(task)  # a client that hangs up does not cancel calls already paid for
        if answered is None:
            return _error(SHUT_DOWN, 503, "unavailable")
        if answered.content is None:
            return _failed(answered, self.shutting_down)
        content, finish = _cut(answered, parsed)
        return web.json_response(
            completion_body(request_id, answered.model(parsed), content, finish, answered.usage, answered.info)
        )

    async def completions(self, request: web.Request) -> web.Response:
        """Legacy completions: each prompt answered as a one-turn chat, all of them before the reply."""
        raw = await self._read(request)
        prompts = await asyncio.to_thread(self._parse, raw, parse_completions)
        request_id = f"cmpl-{uuid.uuid4().hex[:24]}"
        client = client_of(request, prompts[0])
        tasks = [await self._start(p, f"{request_id}-{i}", client) for i, p in enumerate(prompts)]
        outcomes = [await _outcome(task) for task in tasks]
        answered = [a for a in outcomes if a is not None]
        if len(answered) < len(outcomes):
            return _error(SHUT_DOWN, 503, "unavailable")
        failed = next((a for a in answered if a.content is None), None)
        if failed is not None:
            return _failed(failed, self.shutting_down)
        usage = {key: sum(a.usage[key] for a in answered) for key in answered[0].usage}
        texts = [_cut(a, p) for a, p in zip(answered, prompts, strict=True)]
        body = text_completion_body(
            request_id, answered[-1].model(prompts[0]), texts, usage, [a.info for a in answered]
        )
        return web.json_response(body)

    async def responses(self, request: web.Request) -> web.Response:
        raise BadRequest(
            "testtime serve speaks chat completions, not the Responses API: point the client at "
            "/v1/chat/completions (inspect-ai: --model openai-api/testtime/NAME, or -M responses_api=false)",
            404,
            "not_found",
        )

    async def _read(self, request: web.Request) -> bytes:
        """The body of an authorised request, bounded in size and in the time it may take to arrive."""
        self._authorised(request)
        if self.draining:
            raise BadRequest("the server is shutting down", 503, "unavailable")
        if (request.content_length or 0) > self.limits.max_body_bytes:
            raise BadRequest(_too_large(self.limits), 413, "request_too_large")
        try:
            return await asyncio.wait_for(request.read(), self.limits.body_timeout_s)
        except TimeoutError:
            raise BadRequest(f"the body did not arrive within {self.limits.body_timeout_s:g} s", 408) from None
        except web.HTTPRequestEntityTooLarge:
            raise BadRequest(_too_large(self.limits), 413, "request_too_large") from None

    async def _start(self, parsed: ServedRequest, request_id: str, client: str) -> asyncio.Task[Answered]:
        """Check what a request may ask, then answer it as a task of its own (in flight until it lands)."""
        if parsed.domain == "code" and not self.limits.code_requests:
            raise BadRequest("this server does not run programs: start it with --domain code or --code-requests", 403)
        planned = self.served.plan_for(parsed, self.limits.max_calls)
        if parsed.domain == "code":
            await self.served.open_sandbox()
        task = asyncio.create_task(self._answer(parsed, planned, request_id, client))
        self.in_flight.add(task)
        task.add_done_callback(self.in_flight.discard)
        task.add_done_callback(self.answering.discard)
        return task

    def _parse(self, raw: bytes, parse: Callable[..., T]) -> T:
        try:
            body = json.loads(raw)
        except RecursionError:
            raise BadRequest("the body's JSON is nested too deeply") from None
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise BadRequest("the body is not valid JSON") from None
        except ValueError as exc:  # an integer past Python's digit limit
            raise BadRequest(f"the body's JSON cannot be read ({str(exc)[:120]})") from None
        settings = self.served.settings
        cap = settings.max_tokens or self.limits.max_request_tokens
        return parse(body, self.model, settings.method, self.served.domain, self.limits.max_messages, max_tokens=cap)

    async def _answer(self, parsed: ServedRequest, planned: PlannedRequest, request_id: str, client: str) -> Answered:
        async with self._slots:
            self.answering.add(asyncio.current_task())  # type: ignore[arg-type]
            answered = await self.served.answer(parsed, planned, request_id, client)
        self._wrote()
        if self.log is not None:
            self.log(answered.record)
        return answered

    async def _stream(
        self, request: web.Request, parsed: ServedRequest, request_id: str, task: asyncio.Task[Answered]
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=self.keepalive_s)
                if not task.done():
                    await response.write(b": keep-alive\n\n")
            try:
                answered = None if task.cancelled() else task.result()
            except (OSError, sqlite3.OperationalError) as exc:
                if not storage_failure(exc):
                    raise
                failed = json.loads(self._cannot_write(exc).text or "{}")
                await _event(response, failed)
                await response.write(b"data: [DONE]\n\n")
                return response
            if answered is None:
                await _event(response, error_body(SHUT_DOWN, "unavailable", "server_error"))
            elif answered.content is None:
                await _event(response, _failure(answered, self.shutting_down)[1])
            else:
                model = answered.model(parsed)
                content, finish = _cut(answered, parsed)
                await _event(response, chunk_body(request_id, model, {"role": "assistant", "content": ""}))
                await _event(response, chunk_body(request_id, model, {"content": content}))
                await _event(response, chunk_body(request_id, model, {}, finish, testtime=answered.info))
                if parsed.include_usage:
                    await _event(response, chunk_body(request_id, model, None, usage=answered.usage))
            await response.write(b"data: [DONE]\n\n")
        except ConnectionResetError:
            pass  # the client left; the request still finishes and lands in the run directory
        return response

    @property
    def shutting_down(self) -> bool:
        """Past the drain: the engine was stopped by `_close` (a spent budget stops calls without it)."""
        return self.served.engine.stop is not None

    async def _close(self) -> None:
        """The drain ran out: requests still waiting for a slot are answered 503 at once; no new upstream call
        starts, and the calls in flight have `LAND_S` to land in the ledger (their requests answer 503 too); what
        is still out then is cancelled, each call with a ledger line of its own (tokens unknown)."""
        for task in self.in_flight - self.answering:
            task.cancel()
        self.served.engine.request_stop(RunStopped(SHUT_DOWN))
        answering = self.in_flight & self.answering
        if answering:
            await asyncio.wait(answering, timeout=LAND_S)

    # -- running ------------------------------------------------------------------------------------------

    async def run(self, listener: socket.socket, on_ready: Callable[[str], None], drain_s: float) -> None:
        """Serve on a bound socket until a stop signal; then refuse new requests and finish those in flight
        (at most `drain_s` seconds)."""
        runner = web.AppRunner(
            self.app, handle_signals=False, access_log=None, keepalive_timeout=self.limits.idle_timeout_s
        )
        await runner.setup()
        site = web.SockSite(runner, listener)
        await site.start()
        assert runner.server is not None
        sweeper = asyncio.create_task(sweep_connections(runner.server, self.limits))
        bound = listener.getsockname()
        on_ready(f"http://{_host(bound[0])}:{bound[1]}/v1")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_signal(signum: int, frame: object) -> None:
            # A Python-level handler, not the loop's: it runs (and arms the watchdog) even while the loop is busy.
            if self.stop_timer is None:
                self.stop_timer = _watchdog(drain_s + STOP_GRACE_S)
            loop.call_soon_threadsafe(stop.set)

        previous = {signum: signal.signal(signum, on_signal) for signum in (signal.SIGINT, signal.SIGTERM)}
        try:
            await stop.wait()
            self.draining = True
            self.stopped_at = time.monotonic()
            await site.stop()  # no new connections; requests in flight go on
            if self.in_flight:
                await asyncio.wait(set(self.in_flight), timeout=drain_s)
            if self.in_flight:  # the drain ran out: see `_close`
                await self._close()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            for task in self.in_flight:
                task.cancel()
            sweeper.cancel()
            await asyncio.gather(*self.in_flight, sweeper, return_exceptions=True)
            await runner.cleanup()


def _watchdog(after_s: float) -> threading.Timer:
    """End the process if the stop has not finished in `after_s` seconds: what the run wrote stays (ledger
    before results), as after a kill -9."""

    def expire() -> None:
        sys.stderr.write(f"the stop did not finish within {after_s:g} s; exiting now\n")
        sys.stderr.flush()
        os._exit(1)

    timer = threading.Timer(after_s, expire)
    timer.daemon = True
    timer.start()
    return timer


async def _outcome(task: asyncio.Task[Answered]) -> Answered | None:
    """A request's outcome, waited for without cancelling it if the client leaves; None: the server cancelled it."""
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if task.cancelled():
            return None
        raise


def _too_large(limits: ServeLimits) -> str:
    return f"the body is over {limits.max_body_mb:g} MB (--max-body-mb)"


def _bearer(request: web.Request) -> str | None:
    """The key of `Authorization: Bearer KEY` (the scheme case-insensitive, as RFC 6750); None for another scheme."""
    scheme, _, given = request.headers.get("Authorization", "").strip().partition(" ")
    return given.strip() if scheme.lower() == "bearer" else None


def client_of(request: web.Request, parsed: ServedRequest) -> str:
    """Who asks, for a learning server's windows: the OpenAI `user` field, else the address the request came from
    (this server takes one API key, whose label tells no two clients apart)."""
    if parsed.user:
        return f"user:{parsed.user}"
    return f"address:{request.remote or 'unknown'}"


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def _error(message: str, status: int, code: str) -> web.Response:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return web.json_response(error_body(message, code, kind), status=status)


def _failure(answered: Answered, shutting_down: bool) -> tuple[int, dict[str, Any]]:
    """A request whose method produced no answer: the upstream failed (502), or it was stopped (503) by the spent
    budget or by the server's shutdown."""
    stopped = answered.record.status == "stopped"
    stop_code = "unavailable" if shutting_down else "budget_exhausted"
    status, code = (503, stop_code) if stopped else (502, "upstream_error")
    body = error_body(answered.record.error or "no answer", code, "server_error")
    body["testtime"] = answered.info
    return status, body


def _failed(answered: Answered, shutting_down: bool) -> web.Response:
    """`x-should-retry: false`: the openai SDK obeys it over its own rule (retry 408, 409, 429 and every 5xx,
    twice): a retry would run the whole method again, at its whole cost, into the same failure."""
    status, body = _failure(answered, shutting_down)
    return web.json_response(body, status=status, headers={"x-should-retry": "false"})


def _cut(answered: Answered, parsed: ServedRequest) -> tuple[str, str]:
    """The reply cut at the request's first stop sequence (finish reason `stop` then), as an upstream would."""
    content, cut = cut_at_stop(answered.content or "", parsed.stop)
    return content, "stop" if cut else answered.finish_reason


async def _event(response: web.StreamResponse, body: dict[str, Any]) -> None:
    await response.write(b"data: " + json.dumps(body, ensure_ascii=False).encode() + b"\n\n")
