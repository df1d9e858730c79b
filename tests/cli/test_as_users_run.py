"""The installed command as nohup, CI and log files run it, for every run kind (batch, resume, stream, shard and
merge, serve): stderr to a file, no --quiet, so the progress display
takes its off-terminal path (plain lines). A stream's total is unknown there; a regression in that path hid from
every test that passed --quiet."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TESTTIME = str(Path(sys.executable).with_name("testtime"))
ROWS = '{"id":"a","problem":"What is 1+1?"}\n{"id":"b","problem":"What is 2+2?"}\n'


def logged(tmp_path: Path, *args: str, stdin: str | None = None) -> tuple[int, str]:
    """Run `testtime ARGS`, stderr to a file; its exit status and what the file holds."""
    log = tmp_path / "stderr.log"
    with log.open("w") as stderr:
        done = subprocess.run(
            [TESTTIME, *args], input=stdin, stdout=subprocess.PIPE, stderr=stderr, text=True, timeout=120
        )
    return done.returncode, log.read_text()


def test_a_stdin_stream_with_stderr_to_a_file_answers_and_says_how_far_it_got(tmp_path: Path) -> None:
    out = tmp_path / "stream"
    status, said = logged(tmp_path, "run", "--bench", "-", "--n", "2", "--model", "fake:echo", "--out", str(out),
                          stdin=ROWS)  # fmt: skip
    assert status == 0, said
    assert "Traceback" not in said and "progress: 1 answered (a stream)" in said
    assert len((out / "results.jsonl").read_text().splitlines()) == 2


def test_a_batch_and_its_resume_with_stderr_to_a_file(tmp_path: Path) -> None:
    out = tmp_path / "batch"
    status, said = logged(tmp_path, "run", "--bench", "arith", "--limit", "3", "--n", "2", "--model", "fake:echo",
                          "--out", str(out))  # fmt: skip
    assert status == 0, said
    assert "Traceback" not in said and "progress: 3/3 problems" in said
    status, said = logged(tmp_path, "run", "--resume", str(out))
    assert status == 0 and "Traceback" not in said, said


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed on leaving: nothing listens there


def test_a_trt_run_against_a_dead_upstream_ends_within_seconds(tmp_path: Path) -> None:
    """Once 91 calls × 6 attempts over 150 s before "every model call failed": connection refused on a run's
    first calls is a dead server, so the run stops cleanly (exit 4, resumable) and says what to check."""
    import time

    base = f"http://127.0.0.1:{_closed_port()}/v1"
    started = time.monotonic()
    status, said = logged(tmp_path, "run", "--method", "trt", "--bench", "arith", "--limit", "8", "--model",
                          "openai:mock", "--api-base", base, "--out", str(tmp_path / "dead"))  # fmt: skip
    assert status == 4 and "Traceback" not in said, said
    assert "no server is listening" in said and f"run --resume {tmp_path / 'dead'}" in said
    assert "--max-cost X" not in said  # not a budget: resuming needs no larger one
    assert time.monotonic() - started < 60


def test_serve_refuses_to_start_without_a_listening_upstream(tmp_path: Path) -> None:
    base = f"http://127.0.0.1:{_closed_port()}/v1"
    status, said = logged(tmp_path, "serve", "--model", "openai:mock", "--api-base", base, "--port", "0",
                          "--out", str(tmp_path / "served"))  # fmt: skip
    assert status == 2 and "no upstream server is listening" in said and "Traceback" not in said, said


def test_max_cost_over_unpriced_calls_says_so_and_price_makes_it_bind(tmp_path: Path) -> None:
    from testtime.models.mock_server import MockChatServer

    with MockChatServer() as upstream:
        common = ["run", "--bench", "arith", "--limit", "4", "--n", "2", "--model", "openai:mock", "--api-base",
                  upstream.url, "--max-cost", "0.00001", "--concurrency", "1"]  # fmt: skip
        status, said = logged(tmp_path, *common, "--out", str(tmp_path / "unpriced"))
        assert status == 0 and "--max-cost cannot bind: openai:mock returns no price" in " ".join(said.split())
        status, said = logged(tmp_path, *common, "--price", "50,100", "--out", str(tmp_path / "priced"))
    assert "cannot bind" not in said and "cost budget reached" in said, said
    summary = json.loads((tmp_path / "priced" / "summary.json").read_text())
    assert summary["ledger"]["cost_usd"] > 0 and summary["problems"] < 4


def test_an_absurd_plan_is_refused_in_one_line_naming_its_flag(tmp_path: Path) -> None:
    status, said = logged(tmp_path, "run", "--n", "100000000", "--limit", "1", "--model", "fake:echo", "--out",
                          str(tmp_path / "n"))  # fmt: skip
    assert status == 2 and "check --n, or pass --max-planned-calls 100000000" in said, said
    status, said = logged(tmp_path, "run", "--method", "trt", "--method-opt", f"rounds={10**23}", "--limit", "1",
                          "--model", "fake:echo", "--out", str(tmp_path / "trt"))  # fmt: skip
    assert status == 2 and "over the ceiling of 1,000,000: check --method-opt" in said, said
    assert not (tmp_path / "n").exists() and not (tmp_path / "trt").exists()


def test_a_huge_plan_meant_stays_bounded_and_stops_on_sigterm(tmp_path: Path) -> None:
    """Past the ceiling on purpose: memory grows with the calls made, not the calls planned, and SIGTERM stops it
    within seconds (once: 21.7 GB and deaf to SIGTERM and Ctrl-C)."""
    import signal
    import time

    log = (tmp_path / "stderr.log").open("w")
    process = subprocess.Popen([TESTTIME, "run", "--n", "100000000", "--max-planned-calls", "100000000", "--limit",
                                "1", "--model", "fake:echo", "--out", str(tmp_path / "huge")], stderr=log)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "huge" / "ledger.jsonl").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2)
        rss_kb = int(next(line for line in Path(f"/proc/{process.pid}/status").read_text().splitlines()
                          if line.startswith("VmRSS")).split()[1])  # fmt: skip
        process.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        process.wait(timeout=30)
        assert time.monotonic() - sent < 10 and process.returncode == 128 + signal.SIGTERM
        assert rss_kb < 1_000_000, f"{rss_kb} kB after the first calls"
    finally:
        process.kill()
        log.close()


def test_shards_and_their_merge_with_stderr_to_a_file(tmp_path: Path) -> None:
    for index in (1, 2):
        status, said = logged(tmp_path, "run", "--bench", "arith", "--limit", "4", "--n", "2", "--model", "fake:echo",
                              "--shard", f"{index}/2", "--out", str(tmp_path / f"s{index}"))  # fmt: skip
        assert status == 0 and "Traceback" not in said and "progress: 2/2 problems" in said, said
    status, said = logged(tmp_path, "merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out", str(tmp_path / "m"))
    assert status == 0 and "Traceback" not in said, said
    assert len((tmp_path / "m" / "results.jsonl").read_text().splitlines()) == 4


def test_serve_with_stderr_to_a_file_answers_and_logs_each_request(tmp_path: Path) -> None:
    import signal
    import time
    import urllib.request

    log = tmp_path / "serve.log"
    with log.open("w") as stderr:
        command = [TESTTIME, "serve", "--model", "fake:echo", "--port", "0", "--out", str(tmp_path / "served")]
        server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True)
        try:
            assert server.stdout is not None
            url = server.stdout.readline().strip()
            body = json.dumps({"model": "fake:echo", "messages": [{"role": "user", "content": "What is 1+1?"}]})
            request = urllib.request.Request(f"{url}/chat/completions", body.encode(),
                                             {"Content-Type": "application/json"})  # fmt: skip
            with urllib.request.urlopen(request, timeout=60) as response:
                assert response.status == 200 and json.loads(response.read())["choices"]
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
    time.sleep(0.1)
    said = log.read_text()
    assert server.returncode in (0, 128 + signal.SIGTERM) and "Traceback" not in said, said
    assert " calls " in said and "answered" in said, said  # the request's log line, then the stop's summary


def test_a_greedy_run_suggests_no_greedy_baseline(tmp_path: Path) -> None:
    """The greedy warning flags samples at temperature 0 as copies; the table once suggested exactly such a
    majority baseline beside it."""
    command = [TESTTIME, "run", "--method", "trt", "-T", "2", "-K", "2", "--bench", "arith", "--limit", "2",
               "--temperature", "0", "--model", "fake:echo", "--out", str(tmp_path / "g")]  # fmt: skip
    wide = {"COLUMNS": "250", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=wide)
    assert done.returncode == 0, done.stderr
    assert "none at temperature 0" in done.stdout and "--method majority --n" not in done.stdout
    assert "with the solver at temperature 0" in done.stderr
