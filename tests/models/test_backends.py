"""Model specs resolve to backends or fail with one clear line; the fake provider is a real provider."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from testtime.core.errors import ModelError, UserError
from testtime.core.records import Message, SamplingParams
from testtime.models import resolve_model

PROMPT = [Message(role="user", content="What is 20 + 22?")]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("gpt-4o", "no provider prefix; did you mean litellm:openai/gpt-4o or openai:gpt-4o?"),
        ("openai/gpt-4o", "no provider prefix; did you mean litellm:openai/gpt-4o\\?"),
        ("nope:model", "unknown model provider 'nope'; available: fake, hf, litellm, openai, vllm"),
        ("litellm:gpt-4o", "needs a provider"),
        ("fake:weird", "unknown fake model"),
        ("hf:", "needs a model folder"),
    ],
)
def test_bad_specs_fail_with_a_clear_line(spec: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        resolve_model(spec)


def test_vllm_absent_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import importlib.util

    from testtime.models import vllm_server

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here")
    monkeypatch.delenv(vllm_server.VLLM_PYTHON_ENV, raising=False)
    monkeypatch.setattr(vllm_server, "CHECKOUT_VENV", tmp_path / "no-venv" / "bin" / "python")
    with pytest.raises(UserError, match=r"needs vLLM, which is not installed: bash scripts/install --vllm"):
        resolve_model("vllm:/models/x")
    monkeypatch.setenv(vllm_server.VLLM_PYTHON_ENV, str(tmp_path / "nowhere" / "python"))
    with pytest.raises(UserError, match="which does not exist"):
        resolve_model("vllm:/models/x")


def test_fake_echo_boxes_the_last_number() -> None:
    [c] = asyncio.run(resolve_model("fake:echo").generate(PROMPT, 1, SamplingParams()))
    assert "\\boxed{22}" in c.text and c.usage.completion_tokens > 0


def test_fake_file_cycles_responses(tmp_path: Path) -> None:
    script = tmp_path / "r.json"
    script.write_text(json.dumps(["a", "b"]))
    model = resolve_model(f"fake:file:{script}")
    texts = [c.text for c in asyncio.run(model.generate(PROMPT, 3, SamplingParams()))]
    assert texts == ["a", "b", "a"]


def test_fake_fail_raises_a_model_error() -> None:
    with pytest.raises(ModelError, match="quota"):
        asyncio.run(resolve_model("fake:fail:quota").generate(PROMPT, 1, SamplingParams()))


def test_fake_latency_option() -> None:
    model = resolve_model("fake:const:x,latency=0.01")
    assert getattr(model, "latency_s", None) == 0.01


def test_unknown_hf_path_offline_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UserError, match="neither a local folder"):
        resolve_model("hf:org/not-here")
