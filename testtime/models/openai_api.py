"""`openai:` — OpenAI-compatible servers (vLLM, llama.cpp, OpenAI itself), spoken to directly over aiohttp:
under a millisecond of CPU per call where litellm's stack costs ten.

`openai:<served model name> --api-base URL [--api-base URL ...]`: several bases make a fleet (models/fleet.py):
a problem's calls go to one server (`--routing affinity`, the default) or each to the least loaded; a server
that fails to answer (connection refused, timeout, 5xx) is taken out for a while (doubling each time it fails
again) and the call is sent to another at once. With `--n-per-request` a problem's samples are one request.
Only when every server has failed this call does it fail transiently, and the rollout engine (the one place
that retries) backs off and asks again. The wire protocol is one JSON POST to `<base>/chat/completions` with a
bearer key, so no SDK stands between: side by side at concurrency 64 (perf/orchestration.py's setting), the
`openai` package's AsyncOpenAI cost 1.3–1.6 ms of CPU per request even through its low-level `post` over
aiohttp (building httpx request objects), aiohttp alone 0.4 ms.
Keys come from `--api-key-env` or OPENAI_API_KEY; local servers accept any. Prices are unknown (None), never $0.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from testtime.core.call_policy import parse_retry_after
from testtime.core.errors import MalformedAnswer, ModelError, TransientModelError, Unreachable, UserError
from testtime.core.model import CALL_PROBLEM, LanguageModel
from testtime.core.records import Completion, Message, SamplingParams, Usage, usage_from
from testtime.core.secrets import environment_secrets, redact_url, url_secrets
from testtime.models import MODELS
from testtime.models.api import as_list, content_text, logprob_request, served_token_stats
from testtime.models.fleet import Fleet, Routing, Server

CONNECT_TIMEOUT_S = 0.5  # a connect not done by then met a full backlog: the kernel would wait 1 s to retry
CONNECT_TRIES = 6  # quick retries of a refused or stalled connect, before the server counts as failed


class OpenAIModel(LanguageModel):
    token_stats = "top-k"
    takes_n = True
    price: float | None = None  # per call: unknown for a remote server; $0 for one we run ourselves

    def __init__(
        self,
        model: str,
        *,
        api_bases: Sequence[str],
        api_key_env: str | None = None,
        request_timeout_s: float = 600.0,
        routing: Routing = "affinity",
    ) -> None:
        self.name = f"openai:{model}"
        self.model = model
        self.fleet = Fleet(routing)
        self.api_key_env = api_key_env
        self.request_timeout_s = request_timeout_s
        self._key = self._api_key()
        for url in api_bases:
            self.add_server(url)

    @property
    def prices_calls(self) -> bool:
        return self.price is not None

    def add_server(self, url: str) -> None:
        def make_session(_: str) -> Any:
            import aiohttp

            # Credentials written into the URL are the server's own (basic auth through a proxy): then no bearer.
            bearer = {} if "@" in url.split("//", 1)[-1].split("/", 1)[0] else {"Authorization": f"Bearer {self._key}"}
            return aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0),  # the engine's slots bound the calls in flight
                headers=bearer,
                timeout=aiohttp.ClientTimeout(total=self.request_timeout_s, sock_connect=CONNECT_TIMEOUT_S),
            )

        self.fleet.servers.append(Server(url.rstrip("/"), make_session))

    def _api_key(self) -> str:
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise UserError(f"--api-key-env {self.api_key_env}: that environment variable is empty")
            return key
        return os.environ.get("OPENAI_API_KEY") or "EMPTY"  # local servers accept any key; the client needs one

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "api_base": [redact_url(s.url) for s in self.fleet.servers],
            "routing": self.fleet.routing if len(self.fleet.servers) > 1 else None,
            "api_key_env": self.api_key_env,
            "request_timeout_s": self.request_timeout_s,
        }

    def secrets(self) -> list[str]:
        return environment_secrets([self.api_key_env]) + url_secrets(s.url for s in self.fleet.servers)

    async def aclose(self) -> None:
        for server in self.fleet.servers:
            await server.close()

    async def _post(self, server: Server, request: dict[str, Any]) -> tuple[int, bytes, Any]:
        """One POST; a connect that is refused or stalls (a full listen backlog) is tried again at once, with a
        little jitter, rather than after the kernel's one-second SYN retransmit or the engine's backoff."""
        import aiohttp

        url = endpoint(server.url, "chat/completions")
        for attempt in range(1, CONNECT_TRIES + 1):
            try:
                return await _post_once(server.client(), url, request)
            except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError):
                if attempt == CONNECT_TRIES:
                    raise
                await asyncio.sleep(random.uniform(0.005, 0.03) * attempt)
        raise AssertionError("unreachable: the loop returns or raises")

    async def generate(self, messages: Sequence[Message], n: int, params: SamplingParams) -> list[Completion]:
        """`n` samples in one request (`n` choices: one prefill, parallel sampling); a server that answers fewer
        choices than asked does not take `n`, and the rest are asked for one a request (seeds moved on)."""
        completions = await self._request(messages, params, n)
        missing = n - len(completions)
        if missing > 0:
            rest = [self._request(messages, _next_seed(params, j), 1) for j in range(1, missing + 1)]
            completions += [c for batch in await asyncio.gather(*rest) for c in batch]
        return completions

    async def _request(self, messages: Sequence[Message], params: SamplingParams, n: int) -> list[Completion]:
        import aiohttp

        request: dict[str, Any] = {
            "model": self.model,
            "messages": [m.model_dump() for m in messages],
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
        }
        if n > 1:
            request["n"] = n
        if params.seed is not None:
            request["seed"] = params.seed
        if params.stop:
            request["stop"] = list(params.stop)
        request |= logprob_request(params)
        last, refused = "", True
        for server in self.fleet.order(CALL_PROBLEM.get()):
            if n > 1 and not server.takes_n:
                request.pop("n", None)
            started = time.perf_counter()
            server.in_flight += 1
            try:
                status, body, headers = await self._post(server, request)
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:  # refused, reset, timed out
                server.failed(time.monotonic())  # out for a while; the call goes to the next server now
                last = f"{type(exc).__name__}: {exc}"
                refused = refused and isinstance(exc, aiohttp.ClientConnectorError)
                continue
            finally:
                server.in_flight -= 1
            if status >= 500:
                server.failed(time.monotonic())
                last, refused = _status_text(status, body), False
                continue
            if status in (408, 409, 429):  # the server is fine; this call may succeed later
                raise TransientModelError(_status_text(status, body), retry_after=_retry_after(headers))
            if status >= 400:
                raise ModelError(_status_text(status, body))
            server.answered()
            completions = _completions(body, time.perf_counter() - started, self.price, params.logprobs)
            if len(completions) < request.get("n", 1):
                server.takes_n = False  # llama.cpp's server, for one, answers one choice whatever `n` says
            return completions[:n]
        raise (Unreachable if refused and last else TransientModelError)(f"no server answered ({last})")


def _next_seed(params: SamplingParams, offset: int) -> SamplingParams:
    return params if params.seed is None else params.model_copy(update={"seed": (params.seed + offset) % 2**31})


async def _post_once(session: Any, url: str, request: dict[str, Any]) -> tuple[int, bytes, Any]:
    async with session.post(url, json=request) as response:
        return response.status, await response.read(), response.headers


def _status_text(status: int, body: bytes) -> str:
    return f"HTTP {status}: {body[:300].decode('utf-8', 'replace')}"


def _completions(body: bytes, latency: float, price: float | None, logprobs: int | None = None) -> list[Completion]:
    """A 200's body as its choices' completions. The request's usage (one prefill, every choice's tokens) rides
    on the first; the others carry none, so a ledger sums to what the server did. Anything else (not JSON, no
    choice, content that is neither text nor text parts) is a paid, malformed answer: a transient error that the
    engine records and retries, bounded; token counts that are not plain non-negative integers are unknown."""
    try:
        response = json.loads(body)
    except (ValueError, RecursionError):
        raise MalformedAnswer(f"the server's answer is not JSON: {body[:200]!r}", None, price) from None
    usage = usage_from(response.get("usage")) if isinstance(response, dict) else Usage(known=False)
    try:
        choices = response["choices"]
        texts = [content_text(choice["message"].get("content")) for choice in choices]
        reasons = [choice.get("finish_reason") for choice in choices]
        if not choices:
            raise IndexError("no choice")
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        raise MalformedAnswer(f"the server's answer is not a chat completion: {body[:200]!r}", usage, price) from None
    return [
        Completion(
            text=text,
            finish_reason="length" if reason == "length" else "stop",
            usage=usage if i == 0 else Usage(known=usage.known),
            latency_s=latency,
            cost_usd=price if i == 0 else None if price is None else 0.0,
            token_stats=None if logprobs is None else served_token_stats(choice.get("logprobs"), logprobs),
        )
        for i, (text, reason, choice) in enumerate(zip(texts, reasons, choices, strict=True))
    ]


def endpoint(base: str, path: str) -> str:
    """`base` with `path` appended to its path, its query kept after: `http://h/v1?api_key=K` gives
    `http://h/v1/chat/completions?api_key=K`, never `http://h/v1?api_key=K/chat/completions`."""
    parts = urlsplit(base)
    return urlunsplit(parts._replace(path=f"{parts.path.rstrip('/')}/{path}"))


def _retry_after(headers: Any) -> float | None:
    return parse_retry_after(headers.get("retry-after"))


@MODELS.register("openai", help="OpenAI-compatible servers, direct: openai:<model> --api-base URL [...]")
def build_openai(
    rest: str,
    *,
    api_base: str | Sequence[str] | None = None,
    api_key_env: str | None = None,
    request_timeout_s: float = 600.0,
    routing: Routing | None = None,
    **_: Any,
) -> LanguageModel:
    bases = as_list(api_base)
    if not rest:
        raise UserError("openai: needs the served model's name: openai:<model> --api-base http://127.0.0.1:8000/v1")
    if not bases:
        if not api_key_env and not os.environ.get("OPENAI_API_KEY"):  # fail now, not after six retried calls
            raise UserError(
                f"openai:{rest} calls api.openai.com, which needs a key: set OPENAI_API_KEY or --api-key-env NAME "
                "(for a local server, give --api-base URL)"
            )
        bases = ["https://api.openai.com/v1"]
    return OpenAIModel(
        rest, api_bases=bases, api_key_env=api_key_env, request_timeout_s=request_timeout_s,
        routing=routing or "affinity",
    )  # fmt: skip
