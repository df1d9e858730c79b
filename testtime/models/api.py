"""`litellm:` — any hosted API or OpenAI-compatible server (vLLM, llama.cpp) through litellm.

`litellm:<provider>/<model>`, e.g. `litellm:openai/gpt-4o-mini`, or with `--api-base
http://127.0.0.1:8000/v1` and `litellm:openai/<served-name>` for a local server. Keys come from the
provider's usual environment variable (or `--api-key-env NAME`); they are never written to the run.
litellm's own retries are off: the rollout engine is the one place that retries. With several `--api-base`
values, litellm's Router spreads calls over them (least busy first), puts a failing server in cooldown and
sends the failed call to another server at once; only when every server fails does the engine back off.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Sequence
from typing import Any

from testtime.core.call_policy import parse_retry_after
from testtime.core.errors import MalformedAnswer, ModelError, TransientModelError, Unreachable, UserError
from testtime.core.model import LanguageModel
from testtime.core.records import Completion, Message, SamplingParams, TokenStats, usage_from
from testtime.core.secrets import environment_secrets, redact_url, url_secrets
from testtime.models import MODELS
from testtime.models.confidence import top_stats


def _import_litellm() -> Any:
    # Without this, importing litellm tries to fetch its price list from GitHub (3 retries offline).
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


FLEET = "testtime-fleet"  # the Router's name for the one model all the servers serve
OUT_S = 5.0  # how long the Router keeps a failing server out


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None) or getattr(exc, "headers", None) or {}
    return parse_retry_after(headers.get("retry-after"))


class LiteLLMModel(LanguageModel):
    token_stats = "top-k"

    def __init__(
        self,
        model: str,
        *,
        api_bases: Sequence[str] = (),
        api_key_env: str | None = None,
        request_timeout_s: float = 600.0,
    ) -> None:
        self.name = f"litellm:{model}"
        self.model = model
        self.api_bases = list(api_bases)
        self.api_key_env = api_key_env
        self.request_timeout_s = request_timeout_s
        self._litellm = _import_litellm()
        self._router = self._fleet() if len(self.api_bases) > 1 else None

    def _fleet(self) -> Any:
        key = self._api_key()
        deployments = [
            {"model_name": FLEET, "litellm_params": {"model": self.model, "api_base": base, "api_key": key}}
            for base in self.api_bases
        ]
        # Failover to another server is routing, not a retry: no wait, and each server is tried at most once.
        return self._litellm.Router(
            model_list=deployments,
            routing_strategy="least-busy",
            num_retries=len(deployments) - 1,
            retry_after=0,
            allowed_fails=0,
            cooldown_time=OUT_S,
        )

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "api_base": [redact_url(u) for u in self.api_bases],
            "api_key_env": self.api_key_env,
            "request_timeout_s": self.request_timeout_s,
        }

    def secrets(self) -> list[str]:
        return environment_secrets([self.api_key_env]) + url_secrets(self.api_bases)

    def _api_key(self) -> str | None:
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise UserError(f"--api-key-env {self.api_key_env}: that environment variable is empty")
            return key
        if self.api_bases and self.model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
            return "EMPTY"  # local OpenAI-compatible servers accept any key; the client insists on one
        return None

    async def generate(self, messages: Sequence[Message], n: int, params: SamplingParams) -> list[Completion]:
        return list(await asyncio.gather(*(self._one(messages, params) for _ in range(n))))

    async def _one(self, messages: Sequence[Message], params: SamplingParams) -> Completion:
        litellm = self._litellm
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [m.model_dump() for m in messages],
            "temperature": params.temperature,
            "top_p": params.top_p,
            "max_tokens": params.max_tokens,
            "timeout": self.request_timeout_s,
            "drop_params": True,
        }
        if params.seed is not None:
            request["seed"] = params.seed
        if params.stop:
            request["stop"] = list(params.stop)
        request |= logprob_request(params)
        started = time.perf_counter()
        try:
            if self._router is not None:
                response = await self._router.acompletion(**{**request, "model": FLEET})
            else:
                request["num_retries"] = 0
                if self.api_bases:
                    request["api_base"] = self.api_bases[0]
                if (key := self._api_key()) is not None:
                    request["api_key"] = key
                response = await litellm.acompletion(**request)
        except (
            litellm.RateLimitError,
            litellm.Timeout,
            litellm.APIConnectionError,
            litellm.InternalServerError,
            litellm.ServiceUnavailableError,
            litellm.BadGatewayError,
        ) as exc:
            if any(words in str(exc) for words in MALFORMED):  # a 200 that litellm could not parse: paid for
                said = str(exc).splitlines()[0].split(" Traceback")[0]  # litellm puts its own traceback inline
                raise MalformedAnswer(f"{type(exc).__name__}: {said[:300]}") from None
            kind = Unreachable if _refused(exc) else TransientModelError
            raise kind(f"{type(exc).__name__}: {exc}", retry_after=_retry_after(exc)) from None
        except litellm.APIError as exc:
            status = getattr(exc, "status_code", None)
            if isinstance(status, int) and status >= 500:
                raise TransientModelError(f"{type(exc).__name__}: {exc}") from None
            raise ModelError(f"{type(exc).__name__}: {exc}") from None
        except (litellm.BadRequestError, litellm.AuthenticationError, litellm.NotFoundError) as exc:
            raise ModelError(f"{type(exc).__name__}: {exc}") from None
        latency = time.perf_counter() - started
        raw_usage = getattr(response, "usage", None)
        usage = usage_from(raw_usage.model_dump() if hasattr(raw_usage, "model_dump") else raw_usage)
        cost = self._cost(response)
        try:
            choice = response.choices[0]
            text = content_text(choice.message.content)
        except (AttributeError, IndexError, TypeError, ValueError) as exc:
            raise MalformedAnswer(f"the server's answer is not a chat completion ({exc})", usage, cost) from None
        return Completion(
            text=text,
            finish_reason="length" if choice.finish_reason == "length" else "stop",
            usage=usage,
            latency_s=latency,
            cost_usd=cost,
            token_stats=None
            if params.logprobs is None
            else served_token_stats(getattr(choice, "logprobs", None), params.logprobs),
        )

    @property
    def prices_calls(self) -> bool:
        """litellm's own price list (bundled: no network) knows the model, with or without its provider prefix."""
        prices = getattr(self._litellm, "model_cost", {}) or {}
        return self.model in prices or self.model.split("/", 1)[-1] in prices

    def _cost(self, response: Any) -> float | None:
        try:
            return float(self._litellm.completion_cost(completion_response=response))
        except Exception:  # noqa: BLE001 - litellm raises many kinds for "price unknown"; unknown is None
            return None


@MODELS.register("litellm", help="any API or OpenAI-compatible server: litellm:<provider>/<model> [--api-base]")
def build_litellm(
    rest: str,
    *,
    api_base: str | Sequence[str] | None = None,
    api_key_env: str | None = None,
    request_timeout_s: float = 600.0,
    routing: str | None = None,
    **_: Any,
) -> LanguageModel:
    if routing == "affinity" and len(as_list(api_base)) > 1:
        raise UserError(
            "--routing affinity keeps a problem on one server with openai:<model>; litellm's fleet is by load"
        )
    if "/" not in rest:
        raise UserError(
            f"litellm model '{rest}' needs a provider: litellm:<provider>/<model>, "
            "e.g. litellm:openai/gpt-4o-mini (with --api-base for a local server)"
        )
    if any("?" in base for base in as_list(api_base)):
        # litellm's client appends its path after the query (`/v1/?k=v` + `chat/completions`) and drops
        # extra_query for OpenAI-compatible servers: the request would go nowhere.
        raise UserError(
            "--api-base with a query string (?...) is sent mangled by litellm: use openai:<model>, which keeps "
            "the query after the path, or pass the key with --api-key-env"
        )
    if not as_list(api_base) and not api_key_env:
        _check_provider_key(rest)
    return LiteLLMModel(rest, api_bases=as_list(api_base), api_key_env=api_key_env, request_timeout_s=request_timeout_s)


def _check_provider_key(model: str) -> None:
    """A hosted provider's key, checked before the run rather than found missing by every call (each one an
    error record, after retries). Only keys: a missing base URL (ollama's) has a default."""
    missing = [
        k
        for k in _import_litellm().validate_environment(model).get("missing_keys", [])
        if k.endswith(("_KEY", "_TOKEN"))
    ]
    if missing:
        raise UserError(
            f"litellm:{model} needs {' or '.join(missing)} in the environment (or --api-key-env NAME; for a local "
            "server, --api-base URL)"
        )


# How litellm words a 200 it could not parse: it raises those as 500s (which would be retried six times, each
# paid), with nothing but the message to tell them apart: its own checks, and json's for a body that is not JSON.
MALFORMED = (
    "Invalid response object",
    "LiteLLM: provider returned",
    "Expecting value: line",
    "Expecting property name",
    "Unterminated string",
    "Extra data: line",
)


def content_text(content: Any) -> str:
    """A message's content: text, nothing, or a list of text parts (OpenAI's content-part form)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and isinstance(p.get("text", ""), str) for p in content):
        return "".join(p.get("text", "") for p in content if p.get("type", "text") == "text")
    raise ValueError(f"content is a {type(content).__name__}, not text")


def served_token_stats(raw: Any, k: int) -> TokenStats | None:
    """A choice's `logprobs` (OpenAI's form: `content`, a list of {logprob, top_logprobs: [{logprob}]}) as the
    sample's statistics; None when the server sent none or sent something else (then not measured)."""
    if hasattr(raw, "model_dump"):  # litellm's objects
        raw = raw.model_dump()
    content = raw.get("content") if isinstance(raw, dict) else None
    if not isinstance(content, list):
        return None
    chosen, alternatives = [], []
    for token in content:
        value = token.get("logprob") if isinstance(token, dict) else None
        top = token.get("top_logprobs") if isinstance(token, dict) else None
        if not _is_logprob(value) or not isinstance(top, list):
            return None
        values = [t.get("logprob") if isinstance(t, dict) else None for t in top]
        if not all(_is_logprob(v) for v in values):
            return None
        chosen.append(float(value))
        alternatives.append([float(v) for v in values])
    return top_stats(chosen, alternatives, k)


def _is_logprob(value: object) -> bool:
    # A log-probability: a number ≤ 0 (servers send -9999.0 for "impossible"; that is still a number)
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value <= 0


def logprob_request(params: SamplingParams) -> dict[str, Any]:
    """The request fields that ask a server for log-probs (OpenAI's names), when the run asked for them."""
    if params.logprobs is None:
        return {}
    return {"logprobs": True, "top_logprobs": params.logprobs}


def as_list(api_base: str | Sequence[str] | None) -> list[str]:
    """`api_base` as one URL (older callers) or several."""
    return [api_base] if isinstance(api_base, str) else list(api_base or [])


def _refused(exc: BaseException) -> bool:
    """Whether the error's cause is a connection refused (litellm wraps it three layers deep, as a 500)."""
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
