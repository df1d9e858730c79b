"""Reading chat requests: the method from the model-name prefix or the `testtime` field, and each client mistake
a one-line 400 (or 404 for a model not served) that says what to send instead."""

from __future__ import annotations

from typing import Any

import pytest

from testtime.serve.protocol import BadRequest, ServedRequest, parse_request

SERVED = "openai:mock"


def parse(model: str = SERVED, **body: Any) -> ServedRequest:
    body = {"model": model, "messages": [{"role": "user", "content": "What is 2 + 2?"}], **body}
    return parse_request(body, SERVED, "majority", "math")


def refused(body: object, status: int = 400) -> str:
    with pytest.raises(BadRequest) as caught:
        parse_request(body, SERVED, "majority", "math")
    assert caught.value.status == status
    assert "\n" not in str(caught.value)
    return str(caught.value)


def test_the_served_name_gets_the_servers_method() -> None:
    for name in (SERVED, "mock"):  # the spec, or the name after its provider
        request = parse(name)
        assert (request.method, request.options, request.n) == ("majority", {}, None)


def test_prefixes_choose_the_method_and_its_numbers() -> None:
    assert (parse("majority-8/openai:mock").method, parse("majority-8/openai:mock").n) == ("majority", 8)
    trt = parse("trt-4x2/mock")
    assert (trt.method, trt.options) == ("trt", {"rounds": 4, "rollouts": 2})
    assert parse("trt-3/mock").options == {"rounds": 3}
    rsa = parse("rsa-8x3/mock")
    assert (rsa.method, rsa.options) == ("rsa", {"population": 8, "steps": 3})
    assert parse("single/mock").method == "single"


def test_the_body_field_chooses_too_and_cannot_contradict_the_prefix() -> None:
    request = parse(testtime={"method": "trt", "options": {"rounds": 2}, "domain": "code"})
    assert (request.method, request.options, request.domain) == ("trt", {"rounds": 2}, "code")
    assert parse("majority-4/mock", testtime={"n": 6}).n == 6
    message = refused(
        {"model": "trt-2/mock", "messages": [{"role": "user", "content": "x"}], "testtime": {"method": "rsa"}}
    )
    assert "trt" in message and "rsa" in message


def test_unknown_methods_and_models_are_refused_with_what_to_send() -> None:
    user = [{"role": "user", "content": "x"}]
    assert "unknown method 'bogus'" in refused({"model": "bogus-3/mock", "messages": user})
    assert "not served" in refused({"model": "ttrl/mock", "messages": user})
    assert "not served here" in refused({"model": "gpt-4o", "messages": user}, status=404)
    assert "not served here" in refused({"model": "majority-4/gpt-4o", "messages": user}, status=404)
    assert "too many numbers" in refused({"model": "majority-4x2/mock", "messages": user})
    assert "at least 1" in refused({"model": "trt-0x2/mock", "messages": user})
    assert "no field 'methd'" in refused({"model": "mock", "messages": user, "testtime": {"methd": "trt"}})


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ([1, 2], "JSON object"),
        ({"messages": [{"role": "user", "content": "x"}]}, "'model' is missing"),
        ({"model": SERVED}, "non-empty list"),
        ({"model": SERVED, "messages": []}, "non-empty list"),
        ({"model": SERVED, "messages": [{"role": "system", "content": "be brief"}]}, "no user turn"),
        ({"model": SERVED, "messages": [{"role": "tool", "content": "x"}]}, "needs a role"),
        ({"model": SERVED, "messages": [{"role": "user", "content": 5}]}, "must be a string"),
        (
            {"model": SERVED, "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
            "only text parts",
        ),
        ({"model": SERVED, "messages": [{"role": "user", "content": "x"}], "n": 4}, "'n' must be 1"),
        ({"model": SERVED, "messages": [{"role": "user", "content": "x"}], "temperature": "hot"}, "temperature"),
        ({"model": SERVED, "messages": [{"role": "user", "content": "x"}], "temperature": 9}, "temperature"),
        ({"model": SERVED, "messages": [{"role": "user", "content": "x"}], "max_tokens": 0}, "max_tokens"),
        ({"model": SERVED, "messages": [{"role": "user", "content": "x"}], "seed": "1"}, "seed"),
        ({"model": SERVED, "messages": [{"role": "user", "content": "x"}], "stream": "yes"}, "stream"),
        ({"model": SERVED, "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}, "tools"),
        ({"model": SERVED, "messages": [{"role": "user", "content": "x"}], "testtime": {"domain": "bio"}}, "domain"),
    ],
)
def test_malformed_requests_are_one_line_each(body: object, says: str) -> None:
    assert says in refused(body)


def test_sampling_text_parts_and_roles_are_read() -> None:
    request = parse(
        messages=[
            {"role": "developer", "content": "Be careful."},
            {"role": "user", "content": [{"type": "text", "text": "What is"}, {"type": "text", "text": "3 + 4?"}]},
        ],
        temperature=0.3,
        max_completion_tokens=99,
        seed=7,
        stream=True,
        stream_options={"include_usage": True},
    )
    assert [m.role for m in request.messages] == ["system", "user"]
    assert request.statement == "What is\n3 + 4?"
    assert request.sampling == {"temperature": 0.3, "max_tokens": 99, "seed": 7}
    assert request.stream and request.include_usage


def test_served_methods_are_the_registrys_one_problem_methods() -> None:
    """Serve lists what is registered, not a prose list: every method that answers one problem at a time
    (a plugin's too), never one that trains on a set."""
    from testtime.methods import METHODS, PerProblem
    from testtime.serve.protocol import served_methods

    served = served_methods()
    assert {"single", "majority", "trt", "rsa"} <= set(served) and "ttrl" not in served
    assert all(issubclass(METHODS.get(name), PerProblem) for name in served)  # type: ignore[arg-type]
    said = refused({"model": f"ttrl/{SERVED}", "messages": [{"role": "user", "content": "hi"}]})
    assert said.startswith("ttrl trains on a set of problems and is not served; serve offers ")
