"""A server that answers 200 with something that is not a chat completion: never a crash, a bounded number of
paid attempts, a ledger line for each, and token counts that are not counts recorded as unknown, never as
given. Both API paths, against a real HTTP server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import api_engine
from testtime.core.ledger import read_entries
from testtime.core.records import Message, SamplingParams, usage_from
from testtime.models.mock_server import MockChatServer

Cli = Callable[..., Any]
OK = {"choices": [{"message": {"content": "\\boxed{3}"}, "finish_reason": "stop"}]}
MALFORMED = {
    "content a number": {"choices": [{"message": {"content": 42}}], "usage": {"prompt_tokens": 5}},
    "no choices": {"usage": {"prompt_tokens": 5, "completion_tokens": 2}},
    "not json": "<html>gateway</html>",
    "choices not a list": {"choices": {"message": "hi"}},
}
PROVIDERS = ("openai:mock", "litellm:openai/mock")

pytestmark = pytest.mark.usefixtures("fast_retries")  # the failures are the point, not the waits


def _body(value: Any) -> bytes:
    return value.encode() if isinstance(value, str) else json.dumps(value).encode()


def _sample(provider: str, body: bytes) -> tuple[Any, Any, int]:
    with MockChatServer(fault=body) as server:
        engine = api_engine(provider, [server.url], concurrency=2, attempts=6)
        [completion] = asyncio.run(engine.sample([Message(role="user", content="hi")], 1, SamplingParams()))
        return completion, engine.ledger.totals, server.requests


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_a_malformed_answer_is_retried_twice_and_each_paid_attempt_is_a_ledger_line(provider: str, kind: str) -> None:
    completion, totals, requests = _sample(provider, _body(MALFORMED[kind]))
    assert completion.error is not None and "malformed answer" in completion.error and completion.text == ""
    assert requests == 2  # bounded: not the six attempts a 500 gets
    assert totals.calls == requests and totals.errors == requests  # every paid attempt has its line


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    "usage", [{"prompt_tokens": "12", "completion_tokens": "x"}, [1, 2], {"prompt_tokens": -5, "completion_tokens": 2}]
)
def test_token_counts_that_are_not_counts_are_unknown(provider: str, usage: Any) -> None:
    completion, totals, requests = _sample(provider, _body({**OK, "usage": usage}))
    if completion.error is None:  # openai: reads the answer and sets the counts aside
        assert completion.text == "\\boxed{3}" and requests == 1
    assert not completion.usage.known and totals.unknown_token_calls == totals.calls >= 1
    assert totals.prompt_tokens == totals.completion_tokens == 0  # not the negative or made-up numbers


def test_content_given_as_text_parts_is_read() -> None:
    parts = {
        "choices": [{"message": {"content": [{"type": "text", "text": "\\boxed{"}, {"type": "text", "text": "3}"}]}}]
    }
    completion, totals, _ = _sample(
        "openai:mock", _body({**parts, "usage": {"prompt_tokens": 4, "completion_tokens": 2}})
    )
    assert completion.text == "\\boxed{3}" and completion.usage.known and totals.tokens == 6


def test_usage_from_keeps_only_plain_counts() -> None:
    assert usage_from({"prompt_tokens": 3, "completion_tokens": 4.0}).known
    for bad in (
        None,
        [],
        {"prompt_tokens": True, "completion_tokens": 1},
        {"prompt_tokens": 10**9, "completion_tokens": 1},
    ):
        assert not usage_from(bad).known


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_run_against_a_malformed_server_ends_in_one_line_and_pays_what_it_says(
    provider: str, testtime_cli: Cli, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    with MockChatServer(fault=_body(MALFORMED["content a number"])) as server:
        done = testtime_cli(
            "run", "--model", provider, "--api-base", server.url, "--limit", "2", "--n", "2", "--out", str(out),
            "--quiet",
        )  # fmt: skip
        requests = server.requests
    assert done.returncode == 3 and "every model call failed" in done.stderr and "Traceback" not in done.stderr
    assert requests == 2 * 2 * 2  # 4 samples, 2 paid attempts each
    paid = [e for e in read_entries(out / "ledger.jsonl") if not e.cached]
    assert len(paid) == requests and all(e.error for e in paid)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["accuracy"] is None and summary["ledger"]["calls"] == requests
