"""The OpenAI chat-completions wire format as `testtime serve` reads and writes it (and legacy completions, each
prompt a one-turn chat).

A request is checked into a `ServedRequest`: the conversation (one problem), the method and its options, the
request's own sampling. The method comes from the model name's prefix, as users of optillm expect
(`majority-8/MODEL`, `trt-4x2/MODEL`: 4 rounds of 2 rollouts, `rsa-8x3/MODEL`: population 8, 3 steps), or from
an extra body field `testtime: {"method", "options", "n", "domain"}`; the server's own method otherwise. A
mistake is a `BadRequest` (HTTP 400) with one line that says what to send instead.

Responses are plain chat completions (and chunks, for `stream: true`) with one extra field, `testtime`, that
clients may ignore.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from testtime.core.adaptive import Adaptive
from testtime.core.answers.domain import auto_domain
from testtime.core.errors import first_error
from testtime.core.records import Message
from testtime.methods import METHODS, PerProblem, load_methods
from testtime.serve.limits import ServeLimits

Domain = Literal["math", "code", "text"]
DOMAINS: tuple[Domain, ...] = ("math", "code", "text")
DOMAIN_CHOICES = ("auto", *DOMAINS)  # auto: each request's own words decide (`core/answers/domain.py`)
# The prefix's numbers, by method: majority-N, trt-T[xK], rsa-N[xT].
PREFIX_FIELDS: dict[str, tuple[str, ...]] = {
    "majority": ("n",),
    "trt": ("rounds", "rollouts"),
    "rsa": ("population", "steps"),
}
_PREFIX = re.compile(r"^(?P<method>[a-z][a-z0-9_]*(?:-[a-z][a-z0-9_]*)*)(?:-(?P<numbers>\d+(?:x\d+)*))?$")
_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


def served_methods() -> tuple[str, ...]:
    """The registered methods a request may name: those that answer each problem on its own (`PerProblem`: the
    built-ins but ttrl, which trains on a set, and any plugin's)."""
    load_methods()
    return tuple(name for name in METHODS.names() if issubclass(METHODS.get(name), PerProblem))  # type: ignore[arg-type]


class BadRequest(ValueError):
    """A client's mistake: answered with HTTP 400 (or `status`) and this one-line message."""

    def __init__(self, message: str, status: int = 400, code: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.code = status, code


@dataclass
class ServedRequest:
    messages: list[Message]  # the conversation, as the method's prompt
    method: str
    options: dict[str, Any]  # the method's options (prefix numbers, body options), over the server's own
    n: int | None  # majority's samples
    domain: Domain
    model: str  # the model name as the client sent it (echoed back)
    domain_from: str = "server"  # who chose the domain: "request" (testtime.domain), "server" (--domain), "auto"
    stream: bool = False
    include_usage: bool = False  # stream_options.include_usage: a last chunk with the usage
    sampling: dict[str, Any] = field(default_factory=dict)  # temperature / top_p / max_tokens / seed, if given
    stop: tuple[str, ...] = ()  # cut the selected reply at the first of these (samples are drawn whole)
    adaptive: Adaptive | bool | None = (
        None  # testtime.adaptive: a rule, true (the server's or the default), false; None: the server's
    )
    user: str | None = None  # the OpenAI `user` field: who asks (a learning server's windows)
    weights: str | None = None  # a learning server's kept weights the model name asks for (`MODEL+ttrl@STEPS`)

    @property
    def statement(self) -> str:
        """The problem: the last user turn (strategies and reflection quote it)."""
        return last_user_turn(self.messages)


def last_user_turn(messages: list[Message]) -> str:
    """A conversation's problem: its last user turn (parsing makes sure there is one)."""
    return next(m.content for m in reversed(messages) if m.role == "user")


MAX_USER_CHARS = 256


def parse_request(
    body: object,
    served_model: str,
    default_method: str,
    default_domain: str,
    max_messages: int = ServeLimits.max_messages,
    max_tokens: int = ServeLimits.max_request_tokens,
) -> ServedRequest:
    """A chat-completions body → `ServedRequest`, or `BadRequest` naming the first thing wrong."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object with 'model' and 'messages'")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("'model' is missing: send the served model's name, or METHOD/NAME (see GET /v1/models)")
    raw_messages = body.get("messages")
    if isinstance(raw_messages, list) and len(raw_messages) > max_messages:
        raise BadRequest(f"'messages' has {len(raw_messages)} entries; this server takes at most {max_messages}", 413)
    messages = _messages(raw_messages)
    if body.get("n") is not None and (isinstance(body["n"], bool) or body["n"] != 1):
        raise BadRequest("'n' must be 1: the method samples for itself (ask for majority-8/NAME for 8 votes)")
    for unsupported in ("tools", "functions", "response_format", "logprobs"):
        if body.get(unsupported):
            raise BadRequest(f"'{unsupported}' is not supported by testtime serve")
    model, weights = _weights_of(model, served_model)
    named, options, n = _method_of(model, served_model)
    extra = body.get("testtime") or {}
    if not isinstance(extra, dict):
        raise BadRequest('\'testtime\' must be an object: {"method", "options", "n", "domain", "adaptive"}')
    unknown = sorted(set(extra) - {"method", "options", "n", "domain", "adaptive"})
    if unknown:
        raise BadRequest(f"'testtime' has no field '{unknown[0]}'; it takes method, options, n, domain, adaptive")
    method = named or default_method
    if "method" in extra:
        if named is not None and extra["method"] != named:
            raise BadRequest(f"the model name asks for {named}, the 'testtime' field for {extra['method']}")
        method = _known_method(extra["method"])
    given = extra.get("options") or {}
    if not isinstance(given, dict):
        raise BadRequest("'testtime.options' must be an object of the method's options")
    options = {**options, **given}
    if "n" in extra:
        n = _positive(extra["n"], "testtime.n")
    adaptive = _adaptive(extra["adaptive"]) if "adaptive" in extra else None
    domain = extra.get("domain", default_domain)
    if domain not in DOMAIN_CHOICES:
        raise BadRequest(f"'testtime.domain' must be auto, math, code or text, not {domain!r}")
    domain_from = "request" if "domain" in extra else "server"
    if domain == "auto":  # a chat (a haiku, a question in words) goes upstream as written; a sum gets its box
        domain, domain_from = auto_domain([last_user_turn(messages)]), "auto"
    sampling = {}
    for key, low, high in (("temperature", 0.0, 2.0), ("top_p", 1e-9, 1.0)):
        if body.get(key) is not None:
            value = body[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
                raise BadRequest(f"'{key}' must be a number in [{low:g}, {high:g}]")
            sampling[key] = float(value)
    tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if tokens is not None:
        sampling["max_tokens"] = _positive(tokens, "max_tokens")
        if sampling["max_tokens"] > max_tokens:
            raise BadRequest(f"'max_tokens' must be at most {max_tokens:,} on this server (its --max-tokens)")
    if body.get("seed") is not None:
        if isinstance(body["seed"], bool) or not isinstance(body["seed"], int):
            raise BadRequest("'seed' must be an integer")
        sampling["seed"] = body["seed"]
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise BadRequest("'stream' must be true or false")
    stream_options = body.get("stream_options") or {}
    include_usage = bool(isinstance(stream_options, dict) and stream_options.get("include_usage"))
    stop = _stop(body.get("stop"))
    user = body.get("user")
    if user is not None and (not isinstance(user, str) or len(user) > MAX_USER_CHARS):
        raise BadRequest(f"'user' must be a string of at most {MAX_USER_CHARS} characters")
    return ServedRequest(
        messages, method, options, n, domain, weights or model, domain_from, stream, include_usage, sampling, stop,
        adaptive, user or None, weights and weights.rpartition("+ttrl@")[2],
    )  # fmt: skip


def parse_completions(
    body: object,
    served_model: str,
    default_method: str,
    default_domain: str,
    max_prompts: int = ServeLimits.max_messages,
    max_tokens: int = ServeLimits.max_request_tokens,
) -> list[ServedRequest]:
    """A legacy `/v1/completions` body → one request a prompt, each prompt the user turn of a conversation of
    its own (the upstream is a chat model; lm-eval's `local-completions` generation tasks work this way).
    Log-likelihoods (`echo`, `logprobs`) are refused: an answer chosen among samples has none."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object with 'model' and 'prompt'")
    if body.get("echo") or body.get("logprobs"):
        raise BadRequest(
            "testtime serve answers by selection among whole samples and has no log-likelihoods ('echo', "
            "'logprobs'): run generation tasks only, or use lm-eval's local-chat-completions"
        )
    if body.get("stream"):
        raise BadRequest("'stream' is not supported on /v1/completions; /v1/chat/completions streams")
    prompt = body.get("prompt")
    prompts = [prompt] if isinstance(prompt, str) else prompt
    if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) and p for p in prompts):
        raise BadRequest("'prompt' must be text or a list of texts (token ids are not taken: tokenized_requests=False)")
    if len(prompts) > max_prompts:
        raise BadRequest(f"'prompt' has {len(prompts)} entries; this server takes at most {max_prompts}", 413)
    chat = {k: v for k, v in body.items() if k not in ("prompt", "echo", "logprobs", "suffix", "best_of")}
    return [
        parse_request({**chat, "messages": [{"role": "user", "content": p}]}, served_model, default_method,
                      default_domain, max_tokens=max_tokens)
        for p in prompts
    ]  # fmt: skip


def cut_at_stop(text: str, stop: tuple[str, ...]) -> tuple[str, bool]:
    """The text up to the first stop sequence, and whether one was found."""
    ends = [i for i in (text.find(s) for s in stop) if i >= 0]
    return (text[: min(ends)], True) if ends else (text, False)


def _stop(value: object) -> tuple[str, ...]:
    stops = [value] if isinstance(value, str) else value if value is not None else []
    if not isinstance(stops, list) or len(stops) > 4 or not all(isinstance(s, str) and s for s in stops):
        raise BadRequest("'stop' must be a string or a list of at most 4 non-empty strings")
    return tuple(stops)


def _messages(raw: object) -> list[Message]:
    if not isinstance(raw, list) or not raw:
        raise BadRequest("'messages' must be a non-empty list of {role, content}")
    messages = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or item.get("role") not in _ROLES:
            raise BadRequest(f"messages[{i}] needs a role of system, developer, user or assistant")
        messages.append(Message(role=_ROLES[item["role"]], content=_text(item.get("content"), i)))  # type: ignore[arg-type]
    if not any(m.role == "user" for m in messages):
        raise BadRequest("'messages' has no user turn: the problem to solve is the last user message")
    return messages


def _text(content: object, i: int) -> str:
    """A message's content: a string, or a list of text parts (images and audio are refused)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise BadRequest(f"messages[{i}].content: only text parts are supported")
            parts.append(part["text"])
        return "\n".join(parts)
    raise BadRequest(f"messages[{i}].content must be a string or a list of text parts")


def _adaptive(value: object) -> Adaptive | bool:
    """`testtime.adaptive`: true or false, or the rule as an object of `Adaptive`'s fields."""
    if isinstance(value, bool):
        return value
    if not isinstance(value, dict):
        fields = ", ".join(f'"{name}"' for name in Adaptive.model_fields)
        raise BadRequest(f"'testtime.adaptive' must be true, false or an object: {{{fields}}}")
    try:
        return Adaptive.model_validate(value)
    except ValidationError as exc:
        where, message = first_error(exc)
        raise BadRequest(
            f"'testtime.adaptive.{where}': {message}" if where else f"'testtime.adaptive': {message}"
        ) from None


def _known_method(name: object) -> str:
    served = served_methods()
    if name in METHODS.names() and name not in served:
        raise BadRequest(f"{name} trains on a set of problems and is not served; serve offers {', '.join(served)}")
    if name not in served:
        raise BadRequest(f"unknown method {name!r}; serve offers {', '.join(served)}")
    return str(name)


def _weights_of(model: str, served_model: str) -> tuple[str, str | None]:
    """A learning server's weights named in the model (`MODEL+ttrl@STEPS`): the model name without them, and the
    name as asked (None: it names none). Whether they are kept is the server's to say."""
    base, marker, steps = model.rpartition("+ttrl@")
    if marker and steps.isdigit() and len(steps) <= 12 and _served_name(base, served_model):
        return base, model
    return model, None


def _method_of(model: str, served_model: str) -> tuple[str | None, dict[str, Any], int | None]:
    """The method a model name asks for: `NAME` (None: the server's method), or `METHOD[-NUMBERS]/NAME`."""
    if _served_name(model, served_model):
        return None, {}, None
    prefix, sep, name = model.partition("/")
    found = _PREFIX.match(prefix) if sep else None
    if found is None or not _served_name(name, served_model):
        raise BadRequest(
            f"model '{model}' is not served here; use '{served_model}' or METHOD/{served_model} "
            "(majority-8, trt-4x2, rsa-8x3, single)",
            status=404,
            code="model_not_found",
        )
    method = _known_method(found["method"])
    texts = found["numbers"].split("x") if found["numbers"] else []
    if any(len(text) > 12 for text in texts):  # parsed safely; the call cap then judges the plan
        raise BadRequest(f"'{model[:60]}...': a count in a method name has at most 12 digits")
    numbers = [int(x) for x in texts]
    fields = PREFIX_FIELDS.get(method, ())
    if len(numbers) > len(fields):
        shapes = {"single": "single", "majority": "majority-N", "trt": "trt-T or trt-TxK", "rsa": "rsa-N or rsa-NxT"}
        raise BadRequest(f"'{prefix}' has too many numbers; write {shapes[method]}")
    values = dict(zip(fields, numbers, strict=False))
    for key, value in values.items():
        if value < 1:
            raise BadRequest(f"'{prefix}': {key} must be at least 1")
    return method, values, values.pop("n", None)


def _served_name(name: str, served_model: str) -> bool:
    """The model's spec (`openai:gpt-4o-mini`) or the name after its provider (`gpt-4o-mini`)."""
    return name in (served_model, served_model.partition(":")[2])


def _positive(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadRequest(f"'{name}' must be a positive integer")
    return value


# -- responses ----------------------------------------------------------------------------------------------


def completion_body(
    request_id: str, model: str, content: str, finish_reason: str, usage: dict[str, int], testtime: dict[str, Any]
) -> dict[str, Any]:
    return {
        "id": request_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}],
        "usage": usage,
        "testtime": testtime,
    }


def chunk_body(
    request_id: str, model: str, delta: dict[str, Any] | None, finish_reason: str | None = None, **extra: Any
) -> dict[str, Any]:
    """One streamed chunk; `delta=None` is the usage chunk, which has no choices."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
    return {
        "id": request_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        **extra,
    }


def error_body(message: str, code: str = "invalid_request_error", kind: str = "invalid_request_error") -> dict:
    return {"error": {"message": message, "type": kind, "code": code, "param": None}}


def text_completion_body(
    request_id: str, model: str, texts: list[tuple[str, str]], usage: dict[str, int], testtime: list[dict[str, Any]]
) -> dict[str, Any]:
    """A legacy completions response: one choice a prompt, (text, finish_reason) each."""
    return {
        "id": request_id,
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": i, "text": text, "finish_reason": finish, "logprobs": None}
            for i, (text, finish) in enumerate(texts)
        ],
        "usage": usage,
        "testtime": testtime,
    }


def models_body(served_model: str, prefixes: bool = True, kept: list[str] | None = None) -> dict[str, Any]:
    """The served model, and the same model under each method's prefix with its default options (not on a
    server that learns: each request there is answered by its own method; it lists its `kept` weights)."""
    names = [served_model, *(f"{m}/{served_model}" for m in (served_methods() if prefixes else ()))]
    names += [name for name in kept or [] if name != served_model]
    return {"object": "list", "data": [{"id": n, "object": "model", "owned_by": "testtime"} for n in names]}
