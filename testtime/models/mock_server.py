"""A scripted OpenAI-compatible chat server on 127.0.0.1, for tests and perf benchmarks of the API path.

It is a real HTTP server (stdlib, one thread per connection) so litellm, the OpenAI client, retries and
timeouts are exercised for real. Faults are scripted per request number: `faults={1: 429, 2: 500, 3:
"hang"}`, or for every request (`fault=...`); bytes are a 200 with that body (a malformed answer).
`"echo401"` answers 401 with the request's key in the error message, as OpenAI's "Incorrect API key
provided: ..." does. Answers come from `reply(messages) -> str` (default: box the last number of the last
message), cut at the request's `max_tokens` (a word a token) with `finish_reason: "length"`. A request that asks
for `logprobs` gets them, a word a token: each chosen with probability `token_p(word)` (0.6) among
`top_logprobs` alternatives (`ALTERNATIVES`, the likeliest first). A request with `n` gets n choices (one with
`takes_n=False`, as llama.cpp's server answers); `prefill_tokens` counts the prompt tokens the server would
have computed with an ideal prefix cache of its own (a prompt it has seen costs none).
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

Reply = Callable[[list[dict[str, Any]]], str]
ALTERNATIVES = [0.6, 0.3, 0.1] + [1e-6] * 17  # a token's top-20 probabilities; the chosen token is the first


def token_logprobs(words: list[str], top: int, token_p: Callable[[str], float]) -> dict[str, Any]:
    """OpenAI's `logprobs` of a choice: each word a token, chosen at `token_p(word)`, with `top` alternatives."""
    alternatives = [{"token": f"t{j}", "logprob": math.log(p)} for j, p in enumerate(ALTERNATIVES[:top])]
    return {"content": [{"token": w, "logprob": math.log(token_p(w)), "top_logprobs": alternatives} for w in words]}


def box_last_number(messages: list[dict[str, Any]]) -> str:
    numbers = re.findall(r"-?\d+", str(messages[-1].get("content", "")))
    return f"The answer is \\boxed{{{numbers[-1] if numbers else 0}}}."


CARRY_LESSON = "Do not drop the carry from the units into the tens."
_SUM = re.compile(r"What is (\d+) \+ (\d+)\?")


def carry_lesson_reply(messages: list[dict[str, Any]]) -> str:
    """A scripted TRT model for streams: its sums are right only when the prompt carries `CARRY_LESSON`, and
        every reflection distils that lesson and keeps it when asked to generalise (strategies, reflections and
    lessons in the JSON TRT asks for). One round on
        its own never sees the lesson; with memory shared across a stream, every problem after the first does."""
    text = str(messages[-1]["content"])
    if "genuinely different approaches" in text:
        return json.dumps([{"key_technique": "column addition", "what_to_try": "add digit by digit"}] * 4)
    if text.startswith("You are improving a solver"):
        return json.dumps({"insights": [CARRY_LESSON], "deactivate": None, "strategies": []})
    if text.startswith("Lessons learned while solving one problem"):
        return json.dumps([CARRY_LESSON])
    found = _SUM.findall(text)
    if not found:
        return "The answer is \\boxed{0}."
    a, b = map(int, found[-1])
    return f"The answer is \\boxed{{{a + b if 'carry' in text else a + b + 10}}}."


class MockChatServer:
    def __init__(
        self,
        reply: Reply = box_last_number,
        latency_s: float = 0.0,
        faults: dict[int, int | str | bytes] | None = None,
        retry_after_s: float | str = 0.05,
        fault: int | str | bytes | None = None,
        backlog: int = 256,
        token_p: Callable[[str], float] = lambda word: ALTERNATIVES[0],
        takes_n: bool = True,
        seeded: bool = False,
    ) -> None:
        self.reply = reply
        self.seeded = seeded  # each reply starts with the request's seed, as a sampler's output depends on it
        self.takes_n = takes_n
        self.prefill_tokens = 0  # prompt tokens not already in this server's (ideal) prefix cache
        self.choices = 0  # samples served, over all requests
        self._seen: set[str] = set()
        self.token_p = token_p
        self.latency_s = latency_s
        self.faults = dict(faults or {})
        self.fault = fault
        self.retry_after_s = retry_after_s
        self.requests = 0
        self.completed = 0
        self.bodies: list[dict[str, Any]] = []  # every request body as received: what went over the wire
        self.paths: list[str] = []  # every POST's request target, query included
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler(), bind_and_activate=False)
        self._server.daemon_threads = True
        self._server.request_queue_size = backlog  # the listen backlog (5 is Python's and cpp-httplib's default)
        self._server.server_bind()
        self._server.server_activate()
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> MockChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body leave as two writes: with Nagle's algorithm the body waits for the client's
            # delayed ACK of the headers (up to 40 ms a response), which read as client overhead in perf/
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                return

            def _send(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [{"id": "mock", "object": "model"}]})

            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                server.paths.append(self.path)
                if not urlsplit(self.path).path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "mock"}})
                    return
                with server._lock:
                    server.requests += 1
                    server.bodies.append(request)
                    fault = server.faults.get(server.requests, server.fault)
                if fault == "hang":
                    time.sleep(3600)
                    return
                if fault == "echo401":
                    key = self.headers.get("Authorization", "").removeprefix("Bearer ")
                    message = f"Incorrect API key provided: {key}. You can find your API key at the dashboard."
                    self._send(401, {"error": {"message": message, "type": "invalid_request_error"}})
                    return
                if isinstance(fault, bytes):  # a 200 whose body is whatever the test scripted
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(fault)))
                    self.end_headers()
                    self.wfile.write(fault)
                    return
                if isinstance(fault, int):
                    headers = {"retry-after": str(server.retry_after_s)} if fault == 429 else {}
                    self._send(fault, {"error": {"message": f"scripted {fault}", "type": "mock"}}, headers)
                    return
                if server.latency_s:
                    time.sleep(server.latency_s)
                messages = request.get("messages", [])
                prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in messages)
                n = int(request.get("n") or 1) if server.takes_n else 1
                choices = [self._choice(request, index) for index in range(n)]
                completion_tokens = sum(len(c["message"]["content"].split()) for c in choices)
                prompt = json.dumps(messages)
                with server._lock:
                    server.completed += 1
                    server.choices += n
                    if prompt not in server._seen:
                        server._seen.add(prompt)
                        server.prefill_tokens += prompt_tokens
                self._send(
                    200,
                    {
                        "id": f"mock-{server.requests}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": request.get("model", "mock"),
                        "choices": choices,
                        "usage": {
                            "prompt_tokens": prompt_tokens,
                            "completion_tokens": completion_tokens,
                            "total_tokens": prompt_tokens + completion_tokens,
                        },
                    },
                )

            def _choice(self, request: dict[str, Any], index: int) -> dict[str, Any]:
                text, finish = server.reply(request.get("messages", [])), "stop"
                if server.seeded:
                    text = f"[seed {request.get('seed')}:{index}] {text}"
                words, limit = text.split(), request.get("max_tokens")
                if isinstance(limit, int) and len(words) > limit:  # a word a token: cut as a server would
                    text, finish = " ".join(words[:limit]), "length"
                choice: dict[str, Any] = {
                    "index": index,
                    "finish_reason": finish,
                    "message": {"role": "assistant", "content": text},
                }
                if request.get("logprobs"):
                    top = int(request.get("top_logprobs") or 0)
                    choice["logprobs"] = token_logprobs(text.split(), top, server.token_p)
                return choice

        return Handler


def main() -> None:
    """`python -m testtime.models.mock_server --latency 0.2`: serve until killed; prints the URL first."""
    import argparse

    parser = argparse.ArgumentParser(description="A scripted OpenAI-compatible chat server on 127.0.0.1.")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--backlog", type=int, default=256, help="the listen backlog")
    parser.add_argument("--announce", action="store_true", help="then print the count of answered requests as it grows")
    args = parser.parse_args()
    with MockChatServer(latency_s=args.latency, backlog=args.backlog) as server:
        print(server.url, flush=True)
        announced = 0
        while True:
            time.sleep(0.02)
            if args.announce and server.completed != announced:
                announced = server.completed
                print(announced, flush=True)


if __name__ == "__main__":
    main()
