"""`testtime serve` end to end: the real command in a process of its own, in front of a real local HTTP server
(the upstream), with real clients (the `openai` SDK, litellm, aiohttp). What a client gets, what the run
directory records, and what a hostile or unlucky client or upstream cannot do."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from testtime.core.ledger import read_entries
from testtime.experiments.viewer.data import load_run
from testtime.models.mock_server import MockChatServer, box_last_number
from testtime.run.directory import RunDir
from testtime.serve.session import ServedRecord

UPSTREAM_KEY = "sk-upstream-secret-0123456789"
SPEC = "openai:mock"


@contextmanager
def serving(
    upstream: str, tmp_path: Path, *args: str, env: dict[str, str] | None = None, math: bool = True
) -> Iterator[dict[str, Any]]:
    """`testtime serve` on a free port; yields its URL, run directory and process; SIGTERM at the end. A math
    server unless `args` name a --domain or `math` is False (the default, auto): these tests ask "Say 5."."""
    out = tmp_path / "served"
    if math and "--domain" not in args:
        args = ("--domain", "math", *args)
    process = subprocess.Popen(
        [sys.executable, "-m", "testtime.cli", "serve", "--model", SPEC, "--api-base", upstream, "--port", "0",
         "--out", str(out), "--api-key-env", "UPSTREAM_KEY", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "UPSTREAM_KEY": UPSTREAM_KEY, **(env or {})},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    if not url.startswith("http"):
        process.kill()
        raise AssertionError(f"serve did not start: {process.stderr.read() if process.stderr else ''}")
    state: dict[str, Any] = {"url": url, "out": out, "process": process}
    try:
        yield state
    finally:
        if process.poll() is None and not state.get("signalled"):
            process.send_signal(signal.SIGTERM)
        state["stdout"], state["stderr"] = process.communicate(timeout=60)
        state["returncode"] = process.returncode


def client(url: str, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=60)


def served_records(out: Path) -> list[ServedRecord]:
    lines = (out / "requests.jsonl").read_text().splitlines()
    return [ServedRecord.model_validate_json(line) for line in lines]


def every_file_text(out: Path) -> str:
    return "".join(p.read_bytes().decode("utf-8", "replace") for p in out.rglob("*") if p.is_file())


def test_majority_through_the_openai_sdk_counts_every_upstream_call(tmp_path: Path) -> None:
    with MockChatServer() as upstream, serving(upstream.url, tmp_path) as server:
        reply = client(server["url"]).chat.completions.create(
            model=f"majority-5/{SPEC}", messages=[{"role": "user", "content": "What is 40 + 2? Say 42."}]
        )
        assert reply.choices[0].message.content == "The answer is \\boxed{42}."
        extra = reply.model_extra["testtime"]  # type: ignore[index]
        assert extra["method"]["name"] == "majority"
        assert (extra["answer"], extra["candidates"], extra["vote_share"]) == ("42", ["42"] * 5, 1.0)
        assert extra["calls"] == 5 == upstream.requests
        # usage is the sum over every upstream call, as the upstream counted it
        words = len("The answer is \\boxed{42}.".split())
        assert reply.usage is not None and reply.usage.completion_tokens == 5 * words
        # the math prompt asked for a box; the client's own words were kept
        assert "\\boxed{}" in upstream.bodies[0]["messages"][-1]["content"]
        assert upstream.bodies[0]["messages"][-1]["content"].startswith("What is 40 + 2? Say 42.")
        # the viewer reads the run while it serves
        loaded = load_run(server["out"])
        assert loaded.manifest.kind == "served" and extra["id"] in loaded.records
    assert server["returncode"] == 0, server["stderr"]
    run = RunDir.open_existing(server["out"])
    (record,) = run.read_results()
    assert (record.problem_id, record.prediction, record.status) == (extra["id"], "42", "unlabelled")
    (request,) = served_records(server["out"])
    assert (request.id, request.n, request.status, request.calls) == (extra["id"], 5, "answered", 5)
    assert request.sampling["solve"].temperature == 0.7  # majority's default, as recorded for the run
    assert len([e for e in read_entries(run.ledger_path) if e.problem_id == extra["id"]]) == 5
    summary = run.read_summary()
    assert summary is not None and summary.problems == 1 and summary.accuracy is None  # nothing graded, never 0
    assert UPSTREAM_KEY not in every_file_text(server["out"])


def test_a_server_with_logprobs_reports_the_answers_token_confidence(tmp_path: Path) -> None:
    with MockChatServer() as upstream, serving(upstream.url, tmp_path, "--logprobs", "2") as server:
        reply = client(server["url"]).chat.completions.create(
            model=f"majority-3/{SPEC}", messages=[{"role": "user", "content": "What is 40 + 2? Say 42."}]
        )
    assert all(body["logprobs"] is True and body["top_logprobs"] == 2 for body in upstream.bodies)
    extra = reply.model_extra["testtime"]  # type: ignore[index]
    assert extra["logprob_mean"] == pytest.approx(math.log(0.6))  # every mock token is drawn at p = 0.6
    (record,) = RunDir.open_existing(server["out"]).read_results()
    assert all(c.token_stats is not None and c.token_stats.top_k == 2 for c in record.candidates)


def test_litellm_as_a_client_and_a_pinned_seed_redraws_the_same_samples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # offline: litellm's bundled price map, no fetch
    import litellm

    with MockChatServer() as upstream, serving(upstream.url, tmp_path) as server:
        ask = {"messages": [{"role": "user", "content": "What is 6 * 7? Say 42."}], "api_base": server["url"]}
        first = litellm.completion(model=f"openai/majority-3/{SPEC}", api_key="unused", seed=11, **ask)
        assert "\\boxed{42}" in first.choices[0].message.content
        calls = upstream.requests
        again = litellm.completion(model=f"openai/majority-3/{SPEC}", api_key="unused", seed=11, **ask)
        assert upstream.requests == calls  # the same seed: every sample from the run's cache, none paid twice
        assert again.choices[0].message.content == first.choices[0].message.content
    seeds = [r.seed for r in served_records(server["out"])]
    assert seeds == [11, 11]


def test_trt_through_the_server_reports_its_rounds(tmp_path: Path) -> None:
    with MockChatServer() as upstream, serving(upstream.url, tmp_path) as server:
        reply = client(server["url"]).chat.completions.create(
            model=f"trt-2x2/{SPEC}", messages=[{"role": "user", "content": "What is 5 + 2? Say 7."}], max_tokens=200
        )
    extra = reply.model_extra["testtime"]  # type: ignore[index]
    assert extra["method"]["name"] == "trt" and extra["method"]["rounds"] == 2 and extra["method"]["rollouts"] == 2
    assert [r["round"] for r in extra["rounds"]] == [1, 2] and extra["answer"] == "7"
    assert "\\boxed{7}" in reply.choices[0].message.content
    (request,) = served_records(server["out"])
    assert request.calls == upstream.requests and request.sampling["solve"].max_tokens == 200


def test_32_concurrent_requests_each_get_their_own_answer(tmp_path: Path) -> None:
    async def ask_all(url: str) -> list[Any]:
        async with openai.AsyncOpenAI(base_url=url, api_key="unused", max_retries=0) as api:
            return await asyncio.gather(
                *(
                    api.chat.completions.create(
                        model=f"majority-3/{SPEC}", messages=[{"role": "user", "content": f"Echo {1000 + i}."}]
                    )
                    for i in range(32)
                )
            )

    with MockChatServer(latency_s=0.05) as upstream, serving(upstream.url, tmp_path) as server:
        replies = asyncio.run(ask_all(server["url"]))
    assert [r.model_extra["testtime"]["answer"] for r in replies] == [str(1000 + i) for i in range(32)]
    assert upstream.requests == 96 and len({r.id for r in replies}) == 32
    assert sorted(r.id for r in replies) == sorted(r.id for r in served_records(server["out"]))


def test_malformed_requests_are_400s_and_the_server_carries_on(tmp_path: Path) -> None:
    with MockChatServer() as upstream, serving(upstream.url, tmp_path) as server:
        api = client(server["url"])
        with pytest.raises(openai.BadRequestError, match="unknown method 'vote'"):
            api.chat.completions.create(model=f"vote-3/{SPEC}", messages=[{"role": "user", "content": "1"}])
        with pytest.raises(openai.BadRequestError, match="did you mean rounds"):
            trt = {"testtime": {"method": "trt", "options": {"roundz": 2}}}
            api.chat.completions.create(model=SPEC, messages=[{"role": "user", "content": "1"}], extra_body=trt)
        with pytest.raises(openai.NotFoundError, match="not served here"):
            api.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "1"}])
        raw = _post(server["url"] + "/chat/completions", b"{not json")
        assert raw[0] == 400 and raw[1]["error"]["message"] == "the body is not valid JSON"
        assert _post(server["url"] + "/nowhere", b"{}")[0] == 404
        reply = api.chat.completions.create(model=SPEC, messages=[{"role": "user", "content": "Say 3."}])
        assert reply.model_extra["testtime"]["answer"] == "3"
    assert upstream.requests == 8  # only the good request reached the upstream
    assert server["returncode"] == 0


def test_a_failing_upstream_is_an_error_response_never_an_answer_and_never_the_key(tmp_path: Path) -> None:
    with MockChatServer(fault="echo401") as upstream, serving(upstream.url, tmp_path) as server:
        with pytest.raises(openai.APIStatusError) as caught:
            client(server["url"]).chat.completions.create(
                model=f"majority-2/{SPEC}", messages=[{"role": "user", "content": "Say 5."}]
            )
    assert caught.value.status_code == 502
    body = caught.value.response.text
    assert "upstream failed" in body and "Incorrect API key" in body and UPSTREAM_KEY not in body
    (request,) = served_records(server["out"])
    assert request.status == "failed" and request.calls == 2 and UPSTREAM_KEY not in (request.error or "")
    (record,) = RunDir.open_existing(server["out"]).read_results()
    assert record.prediction is None and record.status == "error"
    assert UPSTREAM_KEY not in every_file_text(server["out"])


def test_streaming_sends_keepalives_then_the_answer(tmp_path: Path) -> None:
    with MockChatServer(latency_s=0.6) as upstream, serving(upstream.url, tmp_path, "--keepalive", "0.1") as server:
        raw = _stream_raw(
            server["url"],
            {"model": f"single/{SPEC}", "messages": [{"role": "user", "content": "Say 9."}], "stream": True},
        )
        chunks = list(
            client(server["url"]).chat.completions.create(
                model=f"single/{SPEC}", messages=[{"role": "user", "content": "Say 9."}], stream=True,
                stream_options={"include_usage": True},
            )
        )  # fmt: skip
    assert raw.count(": keep-alive") >= 3 and raw.rstrip().endswith("data: [DONE]")
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "The answer is \\boxed{9}."
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == len(text.split())
    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish and finish[0].model_extra["testtime"]["answer"] == "9"


def test_a_slow_request_never_blocks_the_others(tmp_path: Path) -> None:
    gate = threading.Event()

    def reply(messages: list[dict[str, Any]]) -> str:
        if "slow" in str(messages[-1]["content"]):
            gate.wait(30)
        return box_last_number(messages)

    with MockChatServer(reply=reply) as upstream, serving(upstream.url, tmp_path) as server:
        api = client(server["url"])
        finished: list[str] = []
        slow = threading.Thread(
            target=lambda: finished.append(
                api.chat.completions.create(
                    model=f"single/{SPEC}", messages=[{"role": "user", "content": "slow: say 1"}]
                ).model_extra["testtime"]["answer"]
            )
        )
        slow.start()
        time.sleep(0.3)
        for i in range(3):
            fast = api.chat.completions.create(
                model=f"single/{SPEC}", messages=[{"role": "user", "content": f"say {i}"}]
            )
            finished.append(fast.model_extra["testtime"]["answer"])
        gate.set()
        slow.join(30)
    assert finished == ["0", "1", "2", "1"]


def test_sigterm_drains_requests_in_flight_then_stops(tmp_path: Path) -> None:
    with MockChatServer(latency_s=1.5) as upstream, serving(upstream.url, tmp_path) as server:
        answers: list[Any] = []
        asking = threading.Thread(
            target=lambda: answers.append(
                client(server["url"]).chat.completions.create(
                    model=f"majority-2/{SPEC}", messages=[{"role": "user", "content": "Say 8."}]
                )
            )
        )
        asking.start()
        while upstream.requests < 2:
            time.sleep(0.02)
        server["process"].send_signal(signal.SIGTERM)
        server["signalled"] = True
        asking.join(30)
        with pytest.raises(openai.APIConnectionError):
            client(server["url"]).chat.completions.create(model=SPEC, messages=[{"role": "user", "content": "1"}])
    assert server["returncode"] == 0, server["stderr"]
    assert answers and answers[0].model_extra["testtime"]["answer"] == "8"
    summary = RunDir.open_existing(server["out"]).read_summary()
    assert summary is not None and summary.problems == 1 and summary.ledger.calls == 2
    said = server["stderr"] + server["stdout"]
    assert "stopped: 1 requests (0 answered with an error); the run, every lifetime on this --out: 1 answered" in said
    assert "answered, 2 upstream calls" in said


def test_an_api_key_keeps_other_clients_out(tmp_path: Path) -> None:
    with (
        MockChatServer() as upstream,
        serving(upstream.url, tmp_path, env={"TESTTIME_SERVE_API_KEY": "door-key"}) as server,
    ):
        with pytest.raises(openai.AuthenticationError, match="invalid or missing API key"):
            client(server["url"], "wrong").chat.completions.create(
                model=SPEC, messages=[{"role": "user", "content": "1"}]
            )
        with pytest.raises(openai.AuthenticationError):
            client(server["url"], "wrong").models.list()
        assert upstream.requests == 0
        reply = client(server["url"], "door-key").chat.completions.create(
            model=SPEC, messages=[{"role": "user", "content": "Say 4."}]
        )
        assert reply.model_extra["testtime"]["answer"] == "4"
    assert "door-key" not in every_file_text(server["out"])


def test_bad_settings_fail_before_a_run_directory_exists(tmp_path: Path, testtime_cli: Callable[..., Any]) -> None:
    def serve(*args: str) -> subprocess.CompletedProcess[str]:
        return testtime_cli(
            "serve", "--model", SPEC, "--api-base", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "never"), *args
        )

    for args, says in (
        (("--method", "ttrl"), "ttrl updates weights: it needs --model hf:"),  # a learning server trains local weights
        (("--method", "trt", "--n", "4"), "does not use --n"),
        (("--method", "trt", "-T", "0"), "rounds"),
        (("--domain", "bio"), "--domain must be auto, math, code or text"),
        (("--sandbox", "host"), "--sandbox must be one of"),
    ):
        done = serve(*args)
        assert done.returncode == 2 and says in done.stderr and "Traceback" not in done.stderr, done.stderr
    with socket_in_use() as port:
        done = serve("--port", str(port))
        assert done.returncode == 2 and "cannot listen" in done.stderr
    assert not (tmp_path / "never").exists()


@contextmanager
def socket_in_use() -> Iterator[int]:
    import socket

    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen(1)
    try:
        yield held.getsockname()[1]
    finally:
        held.close()


def _post(url: str, data: bytes) -> tuple[int, dict[str, Any]]:
    async def go() -> tuple[int, dict[str, Any]]:
        async with aiohttp.ClientSession() as session, session.post(url, data=data) as response:
            return response.status, json.loads(await response.text())

    return asyncio.run(go())


def _stream_raw(url: str, body: dict[str, Any]) -> str:
    async def go() -> str:
        async with aiohttp.ClientSession() as session, session.post(url + "/chat/completions", json=body) as response:
            assert response.headers["Content-Type"].startswith("text/event-stream")
            return await response.text()

    return re.sub(r"\r\n", "\n", asyncio.run(go()))


def test_a_code_request_is_solved_with_execution_in_the_sandbox(tmp_path: Path) -> None:
    program = "```python\nprint(int(input()) * 2)\n```"

    def reply(messages: list[dict[str, Any]]) -> str:
        asked = str(messages[-1]["content"])
        if "input" in asked.lower() and "test" in asked.lower() and "double" not in asked.lower():
            return "```\n3\n```\n```\n5\n```"  # test inputs, when the selector asks for some
        return program

    with MockChatServer(reply=reply) as upstream, serving(upstream.url, tmp_path, "--code-requests") as server:
        reply_ = client(server["url"]).chat.completions.create(
            model=f"majority-2/{SPEC}",
            messages=[{"role": "user", "content": "Read an integer and print its double."}],
            extra_body={"testtime": {"domain": "code"}},
        )
    assert reply_.choices[0].message.content == program
    extra = reply_.model_extra["testtime"]
    assert extra["answer"] is not None and "print(int(input()) * 2)" in extra["answer"]
    (request,) = served_records(server["out"])
    assert request.domain == "code" and request.method["selector"]["name"] == "execution"
    assert "tests" in request.sampling  # the execution selector's own call kind, recorded
    bodies = [b["messages"][0] for b in upstream.bodies]
    assert bodies[0]["role"] == "system"  # LiveCodeBench's system prompt, as in runs
    (record,) = RunDir.open_existing(server["out"]).read_results()
    assert record.selection is not None and record.selection.sandbox_seconds > 0  # the candidates ran


def test_an_upstream_that_hangs_is_timed_out_and_asked_again(tmp_path: Path) -> None:
    with (
        MockChatServer(faults={1: "hang"}) as upstream,
        serving(upstream.url, tmp_path, "--request-timeout", "0.5") as server,
    ):
        reply = client(server["url"]).chat.completions.create(
            model=f"single/{SPEC}", messages=[{"role": "user", "content": "Say 6."}]
        )
    assert reply.model_extra["testtime"]["answer"] == "6" and upstream.requests == 2
    (entry,) = read_entries(RunDir.open_existing(server["out"]).ledger_path)
    assert entry.attempts == 2 and entry.error is None


def test_a_spent_budget_is_a_503_not_an_answer(tmp_path: Path) -> None:
    with MockChatServer() as upstream, serving(upstream.url, tmp_path, "--max-tokens-total", "30") as server:
        api = client(server["url"])
        first = api.chat.completions.create(
            model=f"majority-2/{SPEC}", messages=[{"role": "user", "content": "Say 1."}]
        )
        assert first.usage is not None and first.usage.total_tokens >= 30
        with pytest.raises(openai.APIStatusError) as caught:
            api.chat.completions.create(model=f"majority-2/{SPEC}", messages=[{"role": "user", "content": "Say 2."}])
    assert caught.value.status_code == 503 and "token budget reached" in caught.value.response.text
    assert upstream.requests == 2
    assert [r.status for r in served_records(server["out"])] == ["answered", "stopped"]


def test_a_streaming_client_that_hangs_up_still_gets_its_request_recorded(tmp_path: Path) -> None:
    async def hang_up(url: str) -> None:
        body = {"model": f"majority-2/{SPEC}", "messages": [{"role": "user", "content": "Say 4."}], "stream": True}
        async with aiohttp.ClientSession() as session, session.post(url + "/chat/completions", json=body) as response:
            assert await response.content.readline() == b": keep-alive\n"  # then leave

    with (
        MockChatServer(latency_s=0.5) as upstream,
        serving(upstream.url, tmp_path, "--keepalive", "0.1") as server,
    ):
        asyncio.run(hang_up(server["url"]))
        deadline = time.time() + 20
        while time.time() < deadline and not (server["out"] / "requests.jsonl").stat().st_size:
            time.sleep(0.05)
    (request,) = served_records(server["out"])
    assert request.status == "answered" and request.calls == 2 == upstream.requests


def test_a_code_request_without_a_sandbox_is_a_503_and_math_goes_on(tmp_path: Path) -> None:
    dead = {"DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}
    with (
        MockChatServer() as upstream,
        serving(upstream.url, tmp_path, "--sandbox", "docker", "--code-requests", env=dead) as server,
    ):
        api = client(server["url"])
        with pytest.raises(openai.APIStatusError) as caught:
            api.chat.completions.create(
                model=SPEC,
                messages=[{"role": "user", "content": "Print 1."}],
                extra_body={"testtime": {"domain": "code"}},
            )
        assert caught.value.status_code == 503 and "code requests need a sandbox" in caught.value.response.text
        assert upstream.requests == 0  # refused before any call was paid for
        reply = api.chat.completions.create(model=SPEC, messages=[{"role": "user", "content": "Say 2."}])
        assert reply.model_extra["testtime"]["answer"] == "2"


def test_serve_adaptive_stops_a_settled_vote_and_a_request_can_ask_for_the_full_n(tmp_path: Path) -> None:
    """`serve --adaptive`: a request whose votes agree pays 4 of its 16 samples and says why it stopped; a request
    with `testtime.adaptive: false` pays all 16; a bad rule in the body, or one that cannot stop a vote of 16 (a
    first wave of 17, a window of 20), is a 400 naming the field."""
    question = [{"role": "user", "content": "What is 40 + 2? Say 42."}]
    with MockChatServer() as upstream, serving(upstream.url, tmp_path, "--adaptive", "--n", "16") as server:
        sdk = client(server["url"])
        settled = sdk.chat.completions.create(model=SPEC, messages=question)  # type: ignore[arg-type]
        paid_settled = upstream.requests
        full = sdk.chat.completions.create(
            model=SPEC,
            messages=question,
            extra_body={"testtime": {"adaptive": False}},  # type: ignore[arg-type]
        )
        paid_full = upstream.requests - paid_settled
        said = re.escape("'testtime.adaptive': the posterior rule's threshold is a confidence between 0.5 and 1")
        with pytest.raises(openai.BadRequestError, match=said):
            sdk.chat.completions.create(
                model=SPEC,
                messages=question,  # type: ignore[arg-type]
                extra_body={"testtime": {"adaptive": {"rule": "posterior", "threshold": 2}}},
            )
        for rule, field in (({"min_samples": 17}, "min_samples"), ({"rule": "window", "threshold": 20}, "threshold")):
            with pytest.raises(openai.BadRequestError, match=re.escape(f"'testtime.adaptive.{field}'")):
                sdk.chat.completions.create(
                    model=SPEC,
                    messages=question,  # type: ignore[arg-type]
                    extra_body={"testtime": {"adaptive": rule}},
                )
        assert upstream.requests == paid_settled + paid_full  # refused before a call was paid
    assert server["returncode"] == 0, server["stderr"]
    stop = settled.model_extra["testtime"]["adaptive"]  # type: ignore[index]
    assert (stop["drawn"], stop["cap"], stop["reason"], stop["rule"]) == (4, 16, "settled", "posterior")
    assert paid_settled == 4 and paid_full == 16 and "adaptive" not in full.model_extra["testtime"]  # type: ignore[index]
    assert settled.choices[0].message.content == full.choices[0].message.content
