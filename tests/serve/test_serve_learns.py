"""`serve --method ttrl`, end to end on the scripted tiny model through the openai SDK (the mechanics; learning
itself is perf/serve_learns.py's to show on the embedded model): requests answered by the current weights while
updates train behind them, replies naming the weights that answered, a kill -9 that restarts on the last
finished update's weights, and the run graded later and reported prequentially."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.experiments.test_view import CHROMIUM, dom, errors_in
from testtime.core.ledger import read_entries
from testtime.core.results import ResultRecord, StreamUpdate

LEARNING = ["--method", "ttrl", "--method-opt", "preset=cpu", "--method-opt", "update_every=4",
            "--method-opt", "window=4", "--method-opt", "update_steps=2", "--method-opt", "gate=false",
            "--method-opt", "collapse=off"]  # fmt: skip


@contextmanager
def serving(out: Path, model: str, *args: str) -> Iterator[dict[str, Any]]:
    """The installed `testtime serve` as a user runs it (stderr to a file, not --quiet); SIGTERM at the end unless
    the test killed it."""
    log = out.parent / f"{out.name}-{time.time_ns()}.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "testtime.cli", "serve", "--model", model, "--port", "0", "--out", str(out), *args],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**os.environ, "COLUMNS": "200"},
        )
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        state: dict[str, Any] = {"url": url, "process": process, "log": log}
        try:
            assert url.startswith("http"), log.read_text()
            yield state
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            process.communicate(timeout=120)
            state["returncode"] = process.returncode
            state["stderr"] = log.read_text()


def ask(url: str, model: str, i: int) -> Any:
    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=300)
    return client.chat.completions.create(model=model, messages=[{"role": "user", "content": f"What is {i} + 1?"}])


def health(url: str) -> dict[str, Any]:
    return httpx.get(url.removesuffix("/v1") + "/health", timeout=30).json()


def wait_for(url: str, updates: int, patience: float = 300) -> dict[str, Any]:
    deadline = time.time() + patience
    while time.time() < deadline:
        learning = health(url)["learning"]
        if learning["updates"] >= updates and not learning["updating"]:
            return learning
        time.sleep(0.1)
    raise AssertionError(f"no {updates} updates within {patience} s: {health(url)}")


def records(out: Path) -> list[ResultRecord]:
    return [ResultRecord.model_validate_json(line) for line in (out / "results.jsonl").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_served_model_learns_from_its_requests_restarts_on_its_last_weights_and_reports(
    tmp_path: Path, scripted_model: str
) -> None:
    out, model = tmp_path / "served", scripted_model
    with serving(out, model, *LEARNING) as first:
        url = first["url"]
        replies = [ask(url, model, i) for i in range(4)]
        assert {r.model for r in replies} == {model}  # the base weights answered: no update had run
        deadline = time.time() + 120
        while not health(url)["learning"]["updating"] and time.time() < deadline:  # update 1 trains behind
            time.sleep(0.02)
        during = ask(url, model, 4)
        still_training = health(url)["learning"]["updating"]
        # answered while update 1 trained: by the weights as they were, never waiting for it
        assert still_training and during.model == model, (still_training, during.model)
        after_one = wait_for(url, 1)
        assert after_one["weights"] == f"{model}+ttrl@{after_one['steps']}" and after_one["steps"] > 0
        replies += [during, *(ask(url, model, i) for i in range(5, 8))]
        assert replies[-1].model == after_one["weights"] == replies[-1].model_extra["testtime"]["weights"]
        learned = wait_for(url, 2)  # update 2 came due at the 8th request
        first["process"].kill()  # kill -9 with update 2's weights the last finished
    assert first["returncode"] == -signal.SIGKILL
    updates = [StreamUpdate.model_validate_json(x) for x in (out / "stream" / "updates.jsonl").read_text().splitlines()]
    assert [u.arrivals for u in updates] == [4, 8] and updates[-1].state == learned["steps"]
    assert {len(u.learned_from) for u in updates} == {4}
    served = [json.loads(x) for x in (out / "requests.jsonl").read_text().splitlines()]
    assert [r["weights"] for r in served] == [r.model for r in replies]  # each request names what answered it

    with serving(out, model, *LEARNING) as second:  # the same --out after the kill -9
        again = ask(second["url"], model, 8)
        assert again.model == learned["weights"]  # the last finished update's weights, from the first request
    assert second["returncode"] == 0, second["stderr"]
    assert "learning resumed: 2 updates learned from 8 requests, 0 more admitted and waiting" in second["stderr"]
    assert "Traceback" not in first["stderr"] + second["stderr"]

    answered = records(out)
    assert [r.answered_with.arrival for r in answered if r.answered_with] == list(range(9))
    steps = [r.answered_with.state for r in answered if r.answered_with]
    assert steps == sorted(steps) and steps[0] == 0 and steps[-1] == learned["steps"]
    train = [e for e in read_entries(out / "ledger.jsonl") if e.kind == "train_step"]
    assert len(train) == learned["steps"]  # every optimiser step of both updates, once
    summary = json.loads((out / "summary.json").read_text())
    assert summary["prequential"]["order"] == "served" and summary["prequential"]["updates"] == 2
    assert summary["prequential"]["accuracy"] is None  # nothing is labelled until the labels are given

    # the labels, known later: the questions with their answers, as a user's own file; its predictions graded
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        "".join(json.dumps({"question": f"What is {i} + 1?", "answer": str(i + 1)}) + "\n" for i in range(9))
    )
    graded = subprocess.run(
        [sys.executable, "-m", "testtime.cli", "grade", "--bench", str(labels),
         "--predictions", str(out / "predictions.jsonl"), "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert graded.returncode == 0, graded.stderr
    report = json.loads(graded.stdout)
    assert report["n"] == 9 and report["unmatched_requests"] == 0
    asked = {p["id"]: p["statement"] for p in map(json.loads, (out / "problems.jsonl").read_text().splitlines())}
    truth = {r.problem_id: r.prediction == str(int(asked[r.problem_id].split()[2]) + 1) for r in records(out)}
    assert {p["id"]: p["correct"] for p in report["per_problem"]} == truth  # "What is i + 1?" graded as i + 1
    right = sum(truth.values())  # the scripted model answers 1 or 2: right at most on "0 + 1" and "1 + 1"
    assert right <= 2 and report["accuracy"] == pytest.approx(right / 9)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["prequential"]["accuracy"]["mean"] == pytest.approx(right / 9)
    as_answered = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {r["status"] for r in as_answered} == {"unlabelled"}  # results.jsonl is kept as it was answered
    shown = subprocess.run(
        [sys.executable, "-m", "testtime.cli", "report", str(out), "--out", str(tmp_path / "report")],
        capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    said = " ".join((shown.stdout + shown.stderr).split())
    assert f"prequential accuracy of served: {right / 9:.3f} [" in said
    assert f"over 9 requests, 2 updates (final state {learned['steps']})" in said
    if CHROMIUM:  # the viewer reads it prequentially too (CI has chromium; test_view.py skips without it)
        page_file = tmp_path / "view.html"
        viewed = subprocess.run([sys.executable, "-m", "testtime.cli", "view", str(out), "--html", str(page_file)],
                                capture_output=True, text=True, timeout=120)  # fmt: skip
        assert viewed.returncode == 0, viewed.stderr
        page = dom(page_file.as_uri())
        assert errors_in(page).strip() == ""
        assert "9 requests in the order answered, 2 updates" in page
        assert f"{right / 9:.3f} [" in page  # its prequential accuracy, with the interval


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_learning_server_says_what_it_refuses_or_ignores_in_one_line(tmp_path: Path, scripted_model: str) -> None:
    with serving(tmp_path / "served", scripted_model, *LEARNING) as server:
        client = openai.OpenAI(base_url=server["url"], api_key="unused", max_retries=0)
        with pytest.raises(openai.BadRequestError, match="this server learns from its requests"):
            client.chat.completions.create(
                model=f"majority-4/{scripted_model}", messages=[{"role": "user", "content": "What is 1 + 1?"}]
            )
        hot = client.chat.completions.create(
            model=scripted_model, messages=[{"role": "user", "content": "What is 1 + 1?"}], temperature=0.2
        )
        assert hot.model_extra["testtime"]["warnings"] == [
            "temperature ignored: this server learns, and answers at its own evaluation sampling"
        ]
        pinned = [
            client.chat.completions.create(
                model=scripted_model, messages=[{"role": "user", "content": "What is 2 + 2?"}], seed=7
            )
            for _ in range(2)
        ]  # 3 requests: no update is due, so the same weights answer the re-sent one, from the cache
        assert pinned[0].model_extra["testtime"]["candidates"] == pinned[1].model_extra["testtime"]["candidates"]
        listed = [m.id for m in client.models.list()]
        assert listed == [scripted_model]  # no method prefixes: each request is answered by the learner
    assert server["returncode"] == 0 and "Traceback" not in server["stderr"]
    again = [e for e in read_entries(tmp_path / "served" / "ledger.jsonl") if e.problem_id == pinned[1].id]
    assert len(again) == 8 and all(e.cached for e in again)  # the re-sent request paid for nothing
    oracle = subprocess.run(
        [sys.executable, "-m", "testtime.cli", "serve", "--model", scripted_model, "--port", "0",
         "--out", str(tmp_path / "oracle"), *LEARNING, "--method-opt", "reward=oracle"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert oracle.returncode == 2 and "a served request has none" in oracle.stderr
    assert "Traceback" not in oracle.stderr and not (tmp_path / "oracle" / "results.jsonl").exists()
