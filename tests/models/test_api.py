"""The API paths (`litellm:` and the direct `openai:` provider) against a real local OpenAI-compatible HTTP
server, with injected faults: both give the same retries, fault semantics, timeouts, ledger and cache."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import api_engine
from testtime.core.records import Message, SamplingParams
from testtime.core.rollout import RolloutEngine
from testtime.models.mock_server import MockChatServer

PROMPT = [Message(role="user", content="What is 4 + 5?")]
PROVIDERS = ["litellm:openai/mock", "openai:mock"]


@pytest.fixture(params=PROVIDERS)
def provider(request: pytest.FixtureRequest) -> str:
    return request.param


def sample(
    server: MockChatServer, n: int, provider: str, timeout_s: float = 5.0, attempts: int = 4, query: str = ""
) -> tuple[list, RolloutEngine]:
    engine = api_engine(provider, [server.url + query], concurrency=4, attempts=attempts, timeout_s=timeout_s)
    model = engine.model

    async def main() -> list:
        try:
            return await engine.sample(PROMPT, n, SamplingParams(max_tokens=16))
        finally:
            await model.aclose()

    return asyncio.run(main()), engine


def test_completions_and_usage_come_back(provider: str) -> None:
    with MockChatServer() as server:
        out, engine = sample(server, 3, provider)
    assert [c.text for c in out] == ["The answer is \\boxed{5}."] * 3
    assert engine.ledger.totals.calls == 3 and engine.ledger.totals.completion_tokens == 12
    assert engine.ledger.totals.cost_known is False  # a made-up model has no price: unknown, not $0


def test_429_with_retry_after_and_500_are_retried(provider: str) -> None:
    with MockChatServer(faults={1: 429, 2: 500, 3: 503}) as server:
        [completion], engine = sample(server, 1, provider)
        assert server.requests == 4
    assert completion.error is None
    assert engine.ledger.totals.retries == 3


def test_a_hanging_server_times_out_and_the_retry_succeeds(provider: str) -> None:
    with MockChatServer(faults={1: "hang"}) as server:
        [completion], engine = sample(server, 1, provider, timeout_s=0.5)
    assert completion.error is None and engine.ledger.totals.retries == 1


def test_client_errors_are_not_retried(provider: str) -> None:
    with MockChatServer(faults={1: 400, 2: 400}) as server:
        [completion], engine = sample(server, 1, provider)
        assert server.requests == 1
    assert completion.finish_reason == "error" and engine.ledger.totals.errors == 1


def test_persistent_outage_ends_as_an_error_record(provider: str) -> None:
    with MockChatServer(faults={i: 500 for i in range(1, 10)}) as server:
        [completion], _ = sample(server, 1, provider, attempts=3)
        assert server.requests == 3
    assert completion.error is not None and "after 3 attempts" in completion.error


def test_cli_run_through_the_api_never_writes_the_key(
    tmp_path: Path, testtime_cli: Callable[..., Any], provider: str
) -> None:
    secret = "sk-test-" + "7" * 24
    with MockChatServer() as server:
        args = f"run --method majority --bench arith --limit 3 --n 2 --quiet --model {provider}".split()
        result = testtime_cli(
            *args,
            "--api-base",
            server.url,
            "--api-key-env",
            "MY_KEY",
            "--out",
            str(tmp_path / "run"),
            env={"MY_KEY": secret},
        )
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["problems"] == 3 and summary["ledger"]["calls"] == 6
    for path in (tmp_path / "run").iterdir():
        assert secret.encode() not in path.read_bytes(), path


def test_a_query_string_in_the_api_base_stays_after_the_path() -> None:
    """`--api-base http://h/v1?api_key=K` used to send `POST /v1?api_key=K/chat/completions`."""
    with MockChatServer() as server:
        out, _ = sample(server, 1, "openai:mock", attempts=1, query="?api_key=K123")
    assert [c.text for c in out] == ["The answer is \\boxed{5}."]
    assert server.paths == ["/v1/chat/completions?api_key=K123"]


def test_litellm_refuses_a_query_string_it_would_mangle() -> None:
    from testtime.core.errors import UserError
    from testtime.models import resolve_model

    with pytest.raises(UserError, match="sent mangled by litellm: use openai:<model>"):
        resolve_model("litellm:openai/mock", api_base=["http://127.0.0.1:9/v1?api_key=K"])


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("openai:gpt-4o-mini", "calls api.openai.com, which needs a key: set OPENAI_API_KEY"),
        ("litellm:anthropic/claude-3-haiku", "needs ANTHROPIC_API_KEY in the environment"),
    ],
)
def test_a_missing_provider_key_is_refused_before_any_call(
    monkeypatch: pytest.MonkeyPatch, spec: str, message: str
) -> None:
    """It used to be found by every call in turn, each retried: 20-41 s of failures before the run ended."""
    from testtime.core.errors import UserError
    from testtime.models import resolve_model

    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(UserError, match=message):
        resolve_model(spec)
    monkeypatch.setenv("MY_KEY", "sk-x")
    assert resolve_model(spec, api_key_env="MY_KEY") is not None  # a key named explicitly: no guessing
