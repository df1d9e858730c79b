"""The public Python API (`testtime.api`, reachable as `testtime.*`): a run from Python writes the same run
directory as the CLI, resumes, works inside a running event loop, and turns bad input into `UserError`."""

from __future__ import annotations

import asyncio
import inspect
import json
from pathlib import Path
from typing import Any

import pytest

import testtime
from testtime import api
from testtime.core.errors import UserError


def test_every_public_name_is_reachable_from_the_package_and_documented() -> None:
    for name in api.__all__:
        value = getattr(testtime, name)
        assert value is getattr(api, name)
        if inspect.isfunction(value) or inspect.isclass(value):
            assert (value.__doc__ or "").strip(), f"{name} has no docstring"
    assert set(api.__all__) <= set(dir(testtime))
    with pytest.raises(AttributeError, match="no attribute 'not_public'"):
        testtime.not_public  # noqa: B018


def test_a_run_from_python_writes_what_the_cli_writes(tmp_path: Path) -> None:
    from testtime.cli import main

    result = testtime.run_method("majority", bench="arith", model="fake:echo", n=3, limit=4, out=tmp_path / "api")
    with pytest.raises(SystemExit) as exited:
        main(["run", "--method", "majority", "--bench", "arith", "--model", "fake:echo", "--n", "3", "--limit", "4",
              "--out", str(tmp_path / "cli"), "--quiet"])  # fmt: skip
    assert exited.value.code in (0, None)
    cli = testtime.open_run(tmp_path / "cli")
    assert result.path == tmp_path / "api"
    ignored = {"wall_s"}
    assert {k: v for k, v in result.summary.model_dump().items() if k not in ignored} == {
        k: v for k, v in cli.summary.model_dump().items() if k not in ignored
    }
    assert [p.model_dump() for p in result.predictions()] == [p.model_dump() for p in cli.predictions()]
    assert sorted(r.problem_id for r in result.results()) == sorted(r.problem_id for r in cli.results())
    frame = testtime.load_runs(tmp_path / "api", tmp_path / "cli")
    assert len(frame) == 8 and set(frame["method"]) == {"majority"}


def test_selector_and_options_reach_the_method(tmp_path: Path) -> None:
    result = testtime.run_method(
        "majority", bench="arith", model="fake:echo", n=2, limit=2, out=tmp_path / "run",
        selector="majority", selector_options={"tie_policy": "random"}, bench_options={"digits": 1},
    )  # fmt: skip
    manifest = json.loads((result.path / "config.json").read_text())
    assert manifest["method"]["selector"]["tie_policy"] == "random"
    assert manifest["benchmark"]["digits"] == 1
    with pytest.raises(testtime.UserError, match="method single selects nothing"):
        testtime.run_method("single", model="fake:echo", selector="majority", out=tmp_path / "no")


def test_a_stopped_run_resumes_from_python(tmp_path: Path) -> None:
    stopped = testtime.run_method(
        "majority", bench="arith", model="fake:echo", n=2, limit=6, concurrency=1, max_tokens_total=30,
        out=tmp_path / "run",
    )  # fmt: skip
    assert stopped.summary.stopped and stopped.summary.problems < 6
    with pytest.raises(testtime.UserError, match="max_tokens_total"):
        testtime.resume(tmp_path / "run", max_tokens_total=0)
    finished = testtime.resume(tmp_path / "run", max_tokens_total=10**6)
    assert finished.summary.problems == 6 and not finished.summary.stopped


def test_a_run_inside_a_running_event_loop_as_in_a_notebook(tmp_path: Path) -> None:
    async def cell() -> testtime.RunResult:
        return testtime.run_method("single", bench="arith", model="fake:echo", limit=2, out=tmp_path / "run")

    assert asyncio.run(cell()).summary.problems == 2


def test_bad_input_is_a_user_error_naming_the_setting(tmp_path: Path) -> None:
    with pytest.raises(testtime.UserError, match=r"^n: Input should be greater than or equal to 1"):
        testtime.run_method("majority", model="fake:echo", n=0, out=tmp_path / "a")
    with pytest.raises(testtime.UserError, match="unknown method 'nope'"):
        testtime.run_method("nope", model="fake:echo", out=tmp_path / "b")
    with pytest.raises(testtime.UserError, match="run_method has no setting 'samples'"):
        testtime.run_method("majority", model="fake:echo", samples=3, out=tmp_path / "c")
    with pytest.raises(testtime.UserError, match="not a run directory"):
        (tmp_path / "d").mkdir()
        testtime.open_run(tmp_path / "d")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda out: testtime.run_method("majority", model="fake:echo", out=123), "out takes a folder's path"),
        (lambda out: testtime.run_method(model="fake:echo", bench_options="x", out=out), "bench_options takes a dict"),
        (
            lambda out: testtime.run_method(model="fake:echo", method_options=[1], out=out),
            "method_options takes a dict",
        ),
        (lambda out: testtime.run_method(model="fake:echo", temperature=float("inf"), out=out), "finite"),
        (lambda out: testtime.resume(7), "path takes a folder's path"),
        (lambda out: testtime.equivalent(1, 2), "compares answers as text"),
        (lambda out: testtime.extract_answer(None), "reads a completion's text"),
    ],
)
def test_a_wrong_argument_is_the_librarys_one_line_error(tmp_path: Path, call: object, words: str) -> None:
    """The API's mistakes are `UserError`s as the CLI's are (a TypeError, ValueError or AttributeError before)."""
    with pytest.raises(testtime.UserError, match=words):
        call(tmp_path / "run")  # type: ignore[operator]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"rounds": 2}, "rounds is an option of method trt: run_method(..., method_options={'rounds': ...})"),
        ({"digits": 3}, "digits is an option of benchmark arith: run_method(..., bench_options={'digits': ...})"),
        ({"temprature": 0.5}, "run_method has no setting 'temprature'; did you mean temperature?"),
    ],
)
def test_a_misplaced_option_says_where_it_goes_and_writes_nothing(
    tmp_path: Path, keywords: dict[str, Any], message: str
) -> None:
    with pytest.raises(UserError) as caught:
        testtime.run_method("trt", bench="arith", model="fake:echo", limit=1, out=tmp_path / "run", **keywords)
    assert str(caught.value) == message
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("bad", [None, 3, 1.5, object(), [], {}, b"x", ""])
def test_every_bad_argument_of_the_public_functions_is_one_user_error(bad: object, tmp_path: Path) -> None:
    """6 of 42 hostile calls once ended in a raw exception (`observer=object()` mid-run among them)."""
    import testtime
    from testtime.core.errors import UserError

    calls = [
        lambda: testtime.run_method(method=bad, model="fake:echo", out=tmp_path / "a"),  # type: ignore[arg-type]
        lambda: testtime.run_method(bench=bad, model="fake:echo", out=tmp_path / "b"),  # type: ignore[arg-type]
        lambda: testtime.run_method(model=bad, out=tmp_path / "c"),  # type: ignore[arg-type]
        lambda: testtime.resume(bad),  # type: ignore[arg-type]
        lambda: testtime.replay(bad),  # type: ignore[arg-type]
        lambda: testtime.open_run(bad),  # type: ignore[arg-type]
        lambda: testtime.load_runs(bad),  # type: ignore[arg-type]
    ]
    if bad is not None:
        calls += [
            lambda: testtime.run_method(model="fake:echo", observer=bad, limit=1, out=tmp_path / "d"),  # type: ignore[arg-type]
            lambda: testtime.run_method(model="fake:echo", selector=bad, out=tmp_path / "e"),  # type: ignore[arg-type]
        ]
    if bad is not None and not isinstance(bad, dict):  # None and {}: no options, both valid
        calls.append(lambda: testtime.run_method(model="fake:echo", method_options=bad, out=tmp_path / "f"))  # type: ignore[arg-type]
    for call in calls:
        with pytest.raises(UserError) as raised:
            call()
        assert "\n" not in str(raised.value)
    assert not any((tmp_path / name).exists() for name in "abcdef")
