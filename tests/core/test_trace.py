"""The trace keeps every call's prompt and response, each text once, and leads from a candidate to its call;
resume appends to it and a replay writes its own."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

from testtime.core.trace import read_trace
from testtime.run.directory import RunDir

Cli = Callable[..., CompletedProcess[str]]


def test_every_call_is_traced_and_each_text_stored_once(testtime_cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = testtime_cli("run", "--method", "trt", "--bench", "arith", "--limit", "2", "-T", "2", "-K", "2",
                        "--model", "fake:echo", "--quiet", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines, blobs = read_trace(out)
    paid = [json.loads(x) for x in (out / "ledger.jsonl").read_text().splitlines()]
    assert len(lines) == len(paid) == 2 * (1 + 2 * (2 + 1))  # strategies + T·(K rollouts + reflection), per problem
    assert {line.purpose for line in lines} == {"strategies", "solve", "reflect"}
    assert all(blob in blobs for line in lines for _, blob in line.messages)
    few_shot = blobs[lines[0].messages[0][1]]
    stored = (out / "blobs.jsonl").read_text()
    assert stored.count(json.dumps(few_shot, ensure_ascii=False)[1:-1]) == 1  # a prefix every prompt shares, once
    for record in RunDir(out).read_results():
        for rnd in record.rounds:
            assert rnd.selection is not None
        for candidate in record.candidates:
            [call] = [line for line in lines if line.call == candidate.call]
            assert blobs[call.response or ""] == candidate.text and call.purpose == "solve" and call.step == 2


def test_a_replay_traces_its_own_calls_as_cache_hits(testtime_cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["run", "--method", "majority", "--bench", "arith", "--limit", "2", "--n", "3", "--model", "fake:echo"]
    assert testtime_cli(*args, "--quiet", "--out", str(out)).returncode == 0
    assert testtime_cli("run", "--replay", str(out), "--quiet").returncode == 0
    [replay] = [p for p in out.iterdir() if p.name.startswith("replay-")]
    original, _ = read_trace(out)
    replayed, blobs = read_trace(replay)
    assert [line.call for line in replayed] and {line.outcome for line in replayed} == {"cached"}
    assert sorted(line.call for line in replayed) == sorted(line.call for line in original)
    assert all(line.response in blobs for line in replayed)
