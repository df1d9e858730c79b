"""A learning endpoint one can leave running, end to end on the scripted tiny model as users run it (the installed
command, stderr to a file): each update gated on held-out probe questions before it answers, recorded with the
gate's figures; accepted weights kept, listed and answerable by name; an operator's key (never a client's) moving
the serving weights to the base model, which survives a restart; one client's flood and a burst bounded; a
per-request `testtime.n` refused; every request's record saying whether it was learned from."""

from __future__ import annotations

import json
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.serve.test_serve_learns import health, serving, wait_for
from testtime.core.results import StreamUpdate
from testtime.serve.app import STOP_GRACE_S

ADMIN = "admin-key-of-its-own"
SAFE = ["--method", "ttrl", "--method-opt", "preset=cpu", "--method-opt", "update_every=4", "--method-opt", "window=4",
        "--method-opt", "update_steps=1", "--admin-key", ADMIN]  # fmt: skip


def ask(url: str, model: str, question: str, user: str | None = None, **extra: Any) -> Any:
    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=300)
    return client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": question}], user=user or openai.NOT_GIVEN, **extra
    )


def updates_of(out: Path) -> list[StreamUpdate]:
    return [
        StreamUpdate.model_validate_json(line) for line in (out / "stream" / "updates.jsonl").read_text().splitlines()
    ]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_an_update_is_gated_kept_named_and_an_operator_rolls_back(tmp_path: Path, scripted_model: str) -> None:
    out, model = tmp_path / "served", scripted_model
    with serving(out, model, *SAFE) as first:
        url = first["url"]
        replies = [ask(url, model, f"What is {i} + 1?") for i in range(8)]  # 4 probe questions, 4 learned from
        learning = wait_for(url, 1)
        [update] = updates_of(out)
        assert update.gate is not None and update.gate.serving.questions == 4  # scored on the held-out probe
        assert update.outcome == ("accepted" if update.gate.accepted else "refused")
        assert learning["last_gate"]["accepted"] == update.gate.accepted and learning["due"] == 0
        trained = update.weights
        assert trained == f"{model}+ttrl@{learning['steps']}"
        listed = [m.id for m in openai.OpenAI(base_url=url, api_key="unused").models.list().data]
        if update.gate.accepted:
            assert learning["weights"] == trained and trained in listed
            named = openai.OpenAI(base_url=url, api_key="unused", max_retries=0).chat.completions.create(
                model=trained, messages=[{"role": "user", "content": "What is 40 + 1?"}]
            )
            assert named.model == trained
        else:
            assert learning["weights"] == model and trained not in listed
        with pytest.raises(openai.NotFoundError):  # weights never kept are no model here
            openai.OpenAI(base_url=url, api_key="unused", max_retries=0).chat.completions.create(
                model=f"{model}+ttrl@999", messages=[{"role": "user", "content": "What is 1 + 1?"}]
            )
        with pytest.raises(openai.BadRequestError, match=r"testtime\.n"):
            ask(url, model, "What is 3 + 3?", extra_body={"testtime": {"n": 100000}})
        route = url.removesuffix("/v1") + "/v1/testtime/weights"
        assert httpx.post(route, json={"weights": "base"}).status_code == 401
        assert httpx.post(route, json={"weights": "base"}, headers={"Authorization": "Bearer nope"}).status_code == 403
        moved = httpx.post(route, json={"weights": "base"}, headers={"Authorization": f"Bearer {ADMIN}"})
        assert moved.status_code == 200 and moved.json() == {"weights": model}
        assert ask(url, model, "What is 41 + 1?").model == model  # the base weights answer the next request
    assert first["returncode"] == 0 and "Traceback" not in first["stderr"], first["stderr"]
    served = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    assert [r["weights"] for r in served[:8]] == [r.model for r in replies]
    assert all(isinstance(r["learned"], bool) for r in served)
    assert [r["learned"] for r in served[:8]] == [False] * 4 + [True] * 4  # the probe, then a window
    assert "learning server: each request is answered by a vote of 8 samples" in first["stderr"]
    with serving(out, model, *SAFE) as second:  # the operator's choice survives a restart
        assert ask(second["url"], model, "What is 42 + 1?").model == model
    assert second["returncode"] == 0, second["stderr"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_flood_and_a_burst_are_bounded(tmp_path: Path, scripted_model: str) -> None:
    """A client sending 16 copies of one question beside another client's traffic is learned from at most once a
    window; 64 requests at once leave at most two updates due or running."""
    out, model = tmp_path / "served", scripted_model
    with serving(out, model, *SAFE) as run:
        url = run["url"]
        for i in range(16):
            ask(url, model, "What is 2 + 2?", user="flooder")
            ask(url, model, f"What is {i} + 5?", user="someone")
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: ask(url, model, f"What is {i} + 9?", user=f"burst-{i % 8}"), range(64)))
        assert health(url)["learning"]["due"] <= 2
    assert run["returncode"] == 0, run["stderr"]
    served = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    flood = [r for r in served if r["client"] == "user:flooder"]
    assert len(flood) == 16 and sum(r["learned"] for r in flood) <= 8
    assert all(r["learned_why"] for r in flood if not r["learned"])
    burst = served[32:]
    assert sum(r["learned"] for r in burst) <= 3 * 4  # a window waiting, one filling, and one started meanwhile
    # requests answered while an update was gated never took its weights away from the gate
    assert all(u.outcome != "failed" for u in updates_of(out)), [u.why for u in updates_of(out)]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_stop_during_an_update_ends_within_the_drain_and_a_restart_runs_the_update_again(
    tmp_path: Path, scripted_model: str
) -> None:
    """SIGTERM while an update trains: the server ends within `--drain-timeout` (plus its grace), long before the
    update could have finished, and the next start trains that window again."""
    out, model = tmp_path / "served", scripted_model
    long_update = [*SAFE, "--method-opt", "update_steps=100000", "--drain-timeout", "2"]
    with serving(out, model, *long_update) as first:
        url = first["url"]
        for i in range(8):
            ask(url, model, f"What is {i} + 1?")
        deadline = time.monotonic() + 300
        while not health(url)["learning"]["updating"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert health(url)["learning"]["updating"]
        stopped = time.monotonic()
        first["process"].send_signal(signal.SIGTERM)
        first["process"].wait(timeout=120)
        took = time.monotonic() - stopped
    assert first["returncode"] == 0 and "Traceback" not in first["stderr"], first["stderr"]
    assert took < 2 + STOP_GRACE_S, took  # 100000 steps would take hours
    assert "update 1 abandoned at the stop; a restart runs it again" in first["stderr"]
    assert (out / "summary.json").is_file()  # written before the process ended around the abandoned thread
    finished = updates_of(out) if (out / "stream" / "updates.jsonl").exists() else []
    assert [u for u in finished if u.outcome in ("accepted", "refused")] == []
    with serving(out, model, *SAFE) as second:  # the same window, at the ordinary number of steps
        learning = wait_for(second["url"], 1)
        assert learning["updates"] == 1
    assert second["returncode"] == 0, second["stderr"]
    [update] = [u for u in updates_of(out) if u.outcome in ("accepted", "refused")]
    served = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    assert list(update.learned_from) == [r["id"] for r in served[4:8]]  # the window the stop cut short
