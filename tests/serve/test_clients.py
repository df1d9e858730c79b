"""The client recipes of docs/clients.md, run against a real `testtime serve`: inspect-ai through its
OpenAI-compatible provider (and its `openai/` provider with the Responses API switched off; left on, the refusal
names the switch), and lm-eval's request shapes for `local-chat-completions` and `local-completions` (lm-eval
itself needs its tasks from the hub, so its exact payloads are sent here)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from testtime.models.mock_server import MockChatServer

from .test_serve import SPEC, _post, serving

inspect_ai = pytest.importorskip("inspect_ai")


def _inspect_eval(model: str, tmp_path: Path, env: dict[str, str], **model_args: Any) -> Any:
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate

    task = Task(dataset=[Sample(input="Say 7.", target="7"), Sample(input="Say 12.", target="12")],
                solver=generate(), scorer=includes())  # fmt: skip
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        [log] = eval(task, model=model, model_args=model_args, log_dir=str(tmp_path / "logs"), display="none")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return log


def test_inspect_ai_through_its_openai_compatible_provider(tmp_path: Path) -> None:
    with MockChatServer() as upstream, serving(upstream.url, tmp_path) as server:
        env = {"TESTTIME_BASE_URL": server["url"], "TESTTIME_API_KEY": "unused"}
        log = _inspect_eval(f"openai-api/testtime/majority-3/{SPEC}", tmp_path, env)
    assert log.status == "success", log.error
    assert [s.scores["includes"].value for s in log.samples] == ["C", "C"]
    assert upstream.requests == 2 * 3  # two samples, three votes each


def test_inspect_ai_openai_provider_needs_the_responses_api_off_and_is_told(tmp_path: Path) -> None:
    with MockChatServer() as upstream, serving(upstream.url, tmp_path) as server:
        env = {"OPENAI_BASE_URL": server["url"], "OPENAI_API_KEY": "unused"}
        plain = _inspect_eval(f"openai/majority-3/{SPEC}", tmp_path, env, responses_api=False)
        refused = _inspect_eval(f"openai/majority-3/{SPEC}", tmp_path / "refused", env)
    assert plain.status == "success", plain.error
    assert refused.status == "error" and "responses_api=false" in str(refused.error)


def test_lm_eval_request_shapes(tmp_path: Path) -> None:
    """What lm-eval 0.4 sends for a generation task (gsm8k's `until`, greedy by default, a seed)."""
    chat = {"messages": [{"role": "user", "content": "Say 6.\nAnswer:"}], "model": SPEC, "max_tokens": 256,
            "temperature": 0.0, "stop": ["Question:", "</s>", "<|im_end|>"], "seed": 1234}  # fmt: skip
    legacy = {"model": SPEC, "prompt": ["Say 6.\nAnswer:"], "max_tokens": 256, "temperature": 0.0,
              "stop": ["Question:"], "seed": 1234}  # fmt: skip
    with MockChatServer() as upstream, serving(upstream.url, tmp_path, "--method", "single") as server:
        chat_status, chat_reply = _post(server["url"] + "/chat/completions", json.dumps(chat).encode())
        legacy_status, legacy_reply = _post(server["url"] + "/completions", json.dumps(legacy).encode())
    assert chat_status == 200 and chat_reply["choices"][0]["message"]["content"] == "The answer is \\boxed{6}."
    assert legacy_status == 200 and legacy_reply["choices"][0]["text"] == "The answer is \\boxed{6}."
