"""A served run is a run: `testtime serve` killed with -9 under load and started again on the same `--out` goes on
with the same cache, ledger and requests, pays for nothing it answered before, and its summary and predictions
cover both lifetimes, each request under the method it named. Other folders are refused with advice that works."""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai

from testtime.core.ledger import read_entries
from testtime.experiments.viewer.data import index, load_run
from testtime.models.mock_server import MockChatServer, box_last_number

from .test_serve import SPEC, client, served_records, serving

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
QUESTIONS = 6
ANSWERED_FIRST = 3


def _ask(url: str, i: int, method: str = "majority-4") -> dict[str, Any]:
    reply = client(url).chat.completions.create(
        model=f"{method}/{SPEC}", messages=[{"role": "user", "content": f"Say {i}."}], seed=100 + i
    )
    return reply.model_extra["testtime"]  # type: ignore[index]


def test_a_killed_server_continues_on_its_out_and_pays_for_nothing_it_answered(tmp_path: Path) -> None:
    hold = threading.Event()  # the later questions hang upstream until the first server is dead

    def reply(messages: list[dict[str, Any]]) -> str:
        asked = re.match(r"Say (\d+)\.", str(messages[-1]["content"]))
        if asked and int(asked.group(1)) >= ANSWERED_FIRST:
            hold.wait(30)
        return box_last_number(messages)

    with MockChatServer(reply=reply) as upstream:
        answered: dict[int, dict[str, Any]] = {}
        with serving(upstream.url, tmp_path) as first:

            def ask(i: int) -> None:
                try:
                    answered[i] = _ask(first["url"], i)
                except openai.APIError:
                    pass  # the server died under this request

            asking = [threading.Thread(target=ask, args=(i,)) for i in range(QUESTIONS)]
            for thread in asking:
                thread.start()
            while len(answered) < ANSWERED_FIRST or upstream.requests < QUESTIONS * 4:
                time.sleep(0.02)  # the first ones answered, every sample of the others in flight upstream
            first["process"].kill()  # kill -9 under load
            first["signalled"] = True
            hold.set()
            for thread in asking:
                thread.join(30)
        out = first["out"]
        assert sorted(answered) == list(range(ANSWERED_FIRST)) and not (out / "summary.json").exists()
        paid_before = upstream.requests

        with serving(upstream.url, tmp_path) as second:  # the same --out
            again = {i: _ask(second["url"], i) for i in range(QUESTIONS)}
            trt = _ask(second["url"], 0, method="trt-2x2")
        assert second["returncode"] == 0, second["stderr"]
    said = second["stderr"] + second["stdout"]  # this lifetime's requests, and the whole run's
    assert f"stopped: {QUESTIONS + 1} requests" in said and f"{ANSWERED_FIRST + QUESTIONS + 1} answered" in said

    entries = read_entries(out / "ledger.jsonl")
    for i in answered:  # asked again with its seed: every sample from the cache, nothing paid twice
        mine = [e for e in entries if e.problem_id == again[i]["id"] and e.kind == "model_call"]
        assert mine and all(e.cached for e in mine), i
        assert again[i]["answer"] == answered[i]["answer"] == str(i)
    paid = [e for e in entries if e.kind == "model_call" and not e.cached]
    # every upstream call of both lifetimes, but for those in flight at the kill -9 (their replies never came back)
    lost = (QUESTIONS - ANSWERED_FIRST) * 4
    assert len(paid) == upstream.requests - lost and upstream.requests > paid_before

    summary = json.loads((out / "summary.json").read_text())
    records = served_records(out)
    assert summary["problems"] == len([r for r in records if r.status == "answered"]) == ANSWERED_FIRST + QUESTIONS + 1
    assert summary["ledger"]["calls"] == len(paid)
    assert summary["method"] == "majority+trt"  # each method that answered, the server's first
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == summary["problems"]
    assert {p["id"]: p["method"] for p in predictions}[trt["id"]] == "trt"
    assert {p["method"] for p in predictions} == {"majority", "trt"}
    manifest = json.loads((out / "config.json").read_text())
    assert manifest["kind"] == "served" and len(manifest["resumed"]) == 1


def test_a_torn_last_line_from_the_kill_does_not_glue_onto_the_next(tmp_path: Path) -> None:
    with MockChatServer() as upstream:
        with serving(upstream.url, tmp_path) as first:
            _ask(first["url"], 1)
        out = first["out"]
        for name in ("results.jsonl", "requests.jsonl"):  # as a kill -9 mid-write leaves them
            with (out / name).open("a") as f:
                f.write('{"id": "torn')
        with serving(upstream.url, tmp_path) as second:
            _ask(second["url"], 2)
        assert second["returncode"] == 0, second["stderr"]
    assert [r.status for r in served_records(out)] == ["answered", "answered"]
    assert json.loads((out / "summary.json").read_text())["problems"] == 2


def test_another_model_or_a_batch_run_is_refused_with_advice_that_works(
    tmp_path: Path, testtime_cli: Callable[..., Any]
) -> None:
    with MockChatServer() as upstream:
        with serving(upstream.url, tmp_path) as first:
            _ask(first["url"], 1)
        out = first["out"]
        other = testtime_cli("serve", "--model", "openai:other", "--api-base", upstream.url, "--out", str(out))
        assert other.returncode == 2 and f"served with --model {SPEC}" in other.stderr
        batch = tmp_path / "batch"
        done = testtime_cli("run", "--method", "single", "--bench", "arith", "--limit", "1", "--model", "fake:",
                            "--out", str(batch), "--quiet")  # fmt: skip
        assert done.returncode == 0, done.stderr
        with (batch / "results.jsonl").open("a") as f:
            f.write('{"problem_id": "torn')  # as a kill -9 leaves it: its own resume repairs it, not a refused serve
        files = {p.name: p.read_bytes() for p in batch.iterdir() if p.is_file() and p.name != ".lock"}
        refused = testtime_cli("serve", "--model", SPEC, "--api-base", upstream.url, "--out", str(batch))
        assert refused.returncode == 2 and f"testtime run --resume {batch}" in refused.stderr
        assert {p.name: p.read_bytes() for p in batch.iterdir() if p.is_file() and p.name != ".lock"} == files


def test_a_served_run_of_the_previous_release_continues(tmp_path: Path, testtime_cli: Callable[..., Any]) -> None:
    shutil.copytree(FIXTURES / "served-majority-v2", tmp_path / "served")  # where `serving` serves
    with MockChatServer() as upstream:
        with serving(upstream.url, tmp_path, "--method", "majority", "--n", "3") as server:
            again = client(server["url"]).chat.completions.create(
                model=f"majority-3/{SPEC}", messages=[{"role": "user", "content": "Say 1."}], seed=8, max_tokens=100
            )
            assert upstream.requests == 0  # its samples came from the old run's cache
        assert server["returncode"] == 0, server["stderr"]
    out = server["out"]
    assert again.model_extra["testtime"]["answer"] == "1"  # type: ignore[index]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["problems"] == 3 and summary["method"] == "majority+trt"
    methods = [json.loads(line)["method"] for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert methods == ["majority", "trt", "majority"]
    (resumed,) = json.loads((out / "config.json").read_text())["resumed"]
    assert resumed["changed"]["api_base"] == [upstream.url]  # the new upstream, recorded
    reported = testtime_cli("report", str(out), "--out", str(tmp_path / "report"), "--json")
    assert reported.returncode == 0, reported.stderr
    [row] = json.loads((tmp_path / "report" / "report.json").read_text())["runs"]
    assert row["method"] == "majority+trt"  # what answered, as its summary says (once: "majority")
    shown = index(load_run(out))  # the viewer: the run under every method that answered, each request under its own
    assert shown["method"] == "majority+trt" and [p["method"] for p in shown["problems"]] == methods


def test_a_second_server_on_a_live_runs_out_is_refused(tmp_path: Path, testtime_cli: Callable[..., Any]) -> None:
    """Continuing is for a folder nobody writes: while one server answers on it, another is refused by the run's
    lock (with the holder's pid), and the live server's files are untouched."""
    with MockChatServer() as upstream, serving(upstream.url, tmp_path) as first:
        _ask(first["url"], 1)
        out = first["out"]
        before = (out / "config.json").read_text()
        second = testtime_cli("serve", "--model", SPEC, "--api-base", upstream.url, "--out", str(out), "--port", "0")
        assert second.returncode == 2 and f"is being written by process {first['process'].pid}" in second.stderr
        assert (out / "config.json").read_text() == before  # no `resumed` entry from the refused one
        _ask(first["url"], 2)  # the first one serves on
    assert first["returncode"] == 0, first["stderr"]
    assert [r.status for r in served_records(out)] == ["answered", "answered"]
