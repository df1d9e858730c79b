"""A server whose disk fails (full, over quota, past a file-size limit: here RLIMIT_FSIZE) keeps what it recorded,
answers each request it cannot record with a 507 the client can read, says so once on the console and in
/health, and never a traceback. As users run it: the installed command, stderr to a file."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

TESTTIME = str(Path(sys.executable).with_name("testtime"))
LIMIT_BYTES = 300 << 10  # a few dozen requests fit, then every write past it fails with EFBIG


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT_BYTES, LIMIT_BYTES))
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _ask(url: str, i: int) -> tuple[int, dict]:
    body = {"model": "fake:echo", "messages": [{"role": "user", "content": f"What is {i} + {i}? " + "pad " * 300}]}
    request = urllib.request.Request(
        f"{url}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_server_that_cannot_write_refuses_in_507_and_keeps_what_it_recorded(tmp_path: Path) -> None:
    out, log = tmp_path / "served", tmp_path / "stderr.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [TESTTIME, "serve", "--model", "fake:echo", "--n", "2", "--port", "0", "--out", str(out)],
            stdout=subprocess.PIPE, stderr=stderr, text=True, preexec_fn=_limited,
        )  # fmt: skip
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        try:
            statuses = []
            for i in range(400):
                status, body = _ask(url, i)
                statuses.append(status)
                if status == 507:
                    break
            assert statuses[0] == 200 and statuses[-1] == 507, statuses
            assert body["error"]["code"] == "insufficient_storage" and "cannot record" in body["error"]["message"]
            again, _ = _ask(url, 1000)
            assert again == 507  # still refused, and said once
            with urllib.request.urlopen(url.removesuffix("/v1") + "/health", timeout=10) as reply:
                health = json.loads(reply.read())
            assert health["status"] == "cannot_write" and health["cannot_write"]
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
    said = log.read_text()
    assert "Traceback" not in said and said.count(f"error: cannot write to {out}") == 1, said
    answered = statuses.count(200)
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    assert len(records) >= answered  # every request answered 200 was recorded (whole: each line parsed) first
