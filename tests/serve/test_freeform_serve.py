"""`testtime serve` answers any chat: a reply with no math answer is chosen among the whole replies and sent
(200), never a 502; 502 only when the upstream failed, marked so that the openai SDK does not retry it into
triple cost; legacy completions answered, the Responses API refused with what to use instead; greedy sampling
under a multi-sample method said in the reply and the summary. Real server, real upstream, real clients."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import openai
import pytest

from testtime.models.mock_server import MockChatServer
from testtime.run.directory import RunDir

from .test_serve import SPEC, _post, client, served_records, serving

HAIKUS = [
    "Autumn rain falls soft\non the quiet maple leaves\nthe garden listens",
    "Grey autumn rain falls\non the quiet maple leaves\nthe garden sleeps now",
    "Invoices are due",
]
CHAT = [{"role": "user", "content": "Write a haiku about autumn rain."}]


def poet() -> MockChatServer:
    """An upstream that answers in prose, never a box (strategies, reflections and judgements too)."""
    turn = itertools.count()

    def reply(messages: list[dict[str, Any]]) -> str:
        prompt = str(messages[-1].get("content"))
        if "most consistent response" in prompt:  # names the first response shown, by its number
            first = re.findall(r'<response number="(\d+)"', prompt)[0]
            return f"The most consistent response is Response {first}."
        return HAIKUS[next(turn) % len(HAIKUS)]

    return MockChatServer(reply=reply)


@pytest.mark.parametrize("model", [f"single/{SPEC}", f"majority-3/{SPEC}", f"trt-1x3/{SPEC}", f"rsa-4x2/{SPEC}"])
def test_a_chat_prompt_gets_a_reply_from_every_method_on_a_math_server(tmp_path: Path, model: str) -> None:
    with poet() as upstream, serving(upstream.url, tmp_path, "--domain", "math") as server:
        reply = client(server["url"]).chat.completions.create(model=model, messages=CHAT)  # type: ignore[arg-type]
    content = reply.choices[0].message.content
    assert content in HAIKUS[:2] or (model.startswith("single") and content == HAIKUS[0])
    extra = reply.model_extra["testtime"]  # type: ignore[index]
    assert extra["chosen_by"] == "medoid of the whole replies (no sample had a math answer)"
    (request,) = served_records(server["out"])
    assert request.status == "answered" and request.chosen_by == extra["chosen_by"]


JUDGE = "I have generated the following responses to the question"


def test_a_text_server_asks_as_written_and_chooses_by_medoid_or_usc(tmp_path: Path) -> None:
    with poet() as upstream, serving(upstream.url, tmp_path, "--domain", "text") as server:
        medoid = client(server["url"]).chat.completions.create(model=f"majority-3/{SPEC}", messages=CHAT)  # type: ignore[arg-type]
        sent = [b["messages"][-1]["content"] for b in upstream.bodies]
        assert sent[:3] == [CHAT[0]["content"]] * 3  # no \boxed{} instruction added to a chat
        assert len(sent) == 4 and sent[3].startswith(JUDGE)  # then the medoid asks which replies agree
        usc = client(server["url"]).chat.completions.create(
            model=f"majority-3/{SPEC}", messages=CHAT, extra_body={"testtime": {"options": {"selector": "usc"}}}
        )  # type: ignore[arg-type]
    extra = medoid.model_extra["testtime"]  # type: ignore[index]
    assert medoid.choices[0].message.content in HAIKUS[:2] and "chosen_by" not in extra
    assert extra["method"]["selector"]["name"] == "medoid" and 0.0 < extra["confidence"] < 1.0
    assert extra["calls"] == 4  # the poet writes haiku, not groups: the words decided, after one judgement
    assert usc.model_extra["testtime"]["method"]["selector"]["name"] == "usc"  # type: ignore[index]
    assert usc.model_extra["testtime"]["calls"] == 5  # three samples, the judgement, the grouping  # type: ignore[index]
    # the judge named the first response shown: the first candidate's reply (which haiku depends on arrival order)
    assert usc.choices[0].message.content == usc.model_extra["testtime"]["candidates"][0]  # type: ignore[index]


def test_by_default_a_chat_is_text_and_a_sum_is_math_each_recorded(tmp_path: Path) -> None:
    """`--domain auto`, the default: the haiku request goes upstream as written and is answered as text; a sum
    in the same server gets its \\boxed{} instruction and a voted answer. Each request's line says so."""
    with poet() as upstream, serving(upstream.url, tmp_path, math=False) as server:
        haiku = client(server["url"]).chat.completions.create(model=f"majority-3/{SPEC}", messages=CHAT)  # type: ignore[arg-type]
        sent = [b["messages"][-1]["content"] for b in upstream.bodies]
        total = [{"role": "user", "content": "What is 17 * 23?"}]
        client(server["url"]).chat.completions.create(model=f"majority-2/{SPEC}", messages=total)  # type: ignore[arg-type]
        asked = upstream.bodies[-1]["messages"][-1]["content"]
    assert sent[:3] == [CHAT[0]["content"]] * 3 and sent[3].startswith(JUDGE)
    assert haiku.choices[0].message.content in HAIKUS[:2]
    assert "chosen_by" not in haiku.model_extra["testtime"]  # type: ignore[index]
    assert asked.startswith("What is 17 * 23?") and "\\boxed{}" in asked
    chat, arithmetic = served_records(server["out"])
    assert (chat.domain, chat.domain_from) == ("text", "auto")
    assert (arithmetic.domain, arithmetic.domain_from) == ("math", "auto")
    manifest = json.loads((server["out"] / "config.json").read_text())
    assert manifest["benchmark"]["domain"] == "auto"
    recorded = {r.problem_id: r for r in RunDir.open_existing(server["out"]).read_results()}
    assert recorded[chat.id].prediction == haiku.choices[0].message.content  # the reply the client received
    assert recorded[chat.id].status == "unlabelled"  # not no_answer


def test_a_failed_upstream_is_a_502_the_openai_sdk_does_not_retry(tmp_path: Path) -> None:
    with MockChatServer(fault=500) as upstream, serving(upstream.url, tmp_path) as server:
        retrying = openai.OpenAI(base_url=server["url"], api_key="unused", max_retries=2, timeout=60)
        with pytest.raises(openai.InternalServerError) as caught:
            retrying.chat.completions.create(model=f"majority-2/{SPEC}", messages=CHAT)  # type: ignore[arg-type]
        requests = len(served_records(server["out"]))
    assert caught.value.status_code == 502 and caught.value.response.headers["x-should-retry"] == "false"
    assert caught.value.body["code"] == "upstream_error"  # type: ignore[index]
    assert requests == 1  # the SDK's two retries would each have run the method again
    assert "stopped: 1 requests (1 answered with an error)" in server["stderr"] + server["stdout"]


def test_legacy_completions_answer_each_prompt_and_cut_at_stop(tmp_path: Path) -> None:
    """lm-eval's `local-completions` generation request, as it sends it: a list of prompts, `stop`, a seed (to a
    math server: "Say 5." asks for no math, and `--domain auto` would answer it as text)."""
    with MockChatServer() as upstream, serving(upstream.url, tmp_path, "--domain", "math") as server:
        body = {"model": SPEC, "prompt": ["Say 5.", "Say 8."], "max_tokens": 64, "temperature": 0.5,
                "stop": ["{"], "seed": 1234}  # fmt: skip
        status, reply = _post(server["url"] + "/completions", json.dumps(body).encode())
        refused, error = _post(
            server["url"] + "/completions",
            json.dumps({"model": SPEC, "prompt": "a", "echo": True, "logprobs": 1, "max_tokens": 1}).encode(),
        )
        sdk = client(server["url"]).completions.create(model=f"single/{SPEC}", prompt="Say 2.")
    assert status == 200 and reply["object"] == "text_completion"
    assert [c["text"] for c in reply["choices"]] == ["The answer is \\boxed", "The answer is \\boxed"]
    assert [c["finish_reason"] for c in reply["choices"]] == ["stop", "stop"]
    assert [t["answer"] for t in reply["testtime"]] == ["5", "8"]  # each prompt a request of its own (8 votes)
    assert reply["usage"]["completion_tokens"] == 2 * 8 * len("The answer is \\boxed{5}.".split())
    assert refused == 400 and "log-likelihoods" in error["error"]["message"]
    assert sdk.choices[0].text == "The answer is \\boxed{2}."


def test_the_responses_api_is_refused_with_the_flag_to_use(tmp_path: Path) -> None:
    with MockChatServer() as upstream, serving(upstream.url, tmp_path) as server:
        status, body = _post(server["url"] + "/responses", json.dumps({"model": SPEC, "input": "hi"}).encode())
    assert status == 404 and "responses_api=false" in body["error"]["message"]
    assert "openai-api/" in body["error"]["message"]


def test_greedy_samples_are_said_in_the_reply_and_the_summary(tmp_path: Path) -> None:
    with MockChatServer() as upstream, serving(upstream.url, tmp_path) as server:
        greedy = client(server["url"]).chat.completions.create(
            model=f"majority-4/{SPEC}", messages=[{"role": "user", "content": "Say 3."}], temperature=0
        )
        sampled = client(server["url"]).chat.completions.create(
            model=f"majority-4/{SPEC}", messages=[{"role": "user", "content": "Say 3."}], temperature=0.7
        )
    assert "4 copies of one answer" in greedy.model_extra["testtime"]["warnings"][0]  # type: ignore[index]
    assert "warnings" not in sampled.model_extra["testtime"]  # type: ignore[index]
    summary = RunDir.open_existing(server["out"]).read_summary()
    assert summary is not None and summary.warnings[0].startswith("1 requests drew several samples at temperature 0")
