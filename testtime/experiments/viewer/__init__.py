"""`testtime view RUN [RUN ...]`: a local viewer of runs, served on 127.0.0.1 or written as one static page.

The index (each run's table and its problems) is built at start; a problem's detail when it is opened
(served) or once for every problem (`--html`, a self-contained file). See `data.py` for what is shown and
`page.py` for the page.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from testtime.core.errors import UserError
from testtime.experiments.viewer.data import LoadedRun, detail, index, load_run
from testtime.experiments.viewer.page import render


def load(paths: list[Path]) -> list[LoadedRun]:
    if not paths:
        raise UserError("view needs at least one run directory")
    return [load_run(p) for p in paths]


def static_page(runs: list[LoadedRun]) -> str:
    """One self-contained HTML file: the index and every problem's detail inline."""
    data = {"runs": [index(r) for r in runs], "details": [{pid: detail(r, pid) for pid in r.records} for r in runs]}
    return render(data, " · ".join(r.path.name for r in runs))


class Viewer:
    """The page at `/`, a problem's detail at `/api/detail?run=I&problem=ID`; 127.0.0.1 only."""

    def __init__(self, runs: list[LoadedRun], port: int = 0) -> None:
        self.runs = runs
        page = render({"runs": [index(r) for r in runs]}, " · ".join(r.path.name for r in runs)).encode()
        viewer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def _send(self, status: int, body: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                url = urlparse(self.path)
                if url.path in ("/", "/index.html"):
                    self._send(200, page, "text/html; charset=utf-8")
                    return
                if url.path == "/api/detail":
                    query = parse_qs(url.query)
                    try:
                        run = viewer.runs[int(query["run"][0])]
                        body = json.dumps(detail(run, query["problem"][0]), ensure_ascii=False).encode()
                    except (KeyError, IndexError, ValueError):
                        self._send(404, b'{"error": "no such run or problem"}', "application/json")
                        return
                    self._send(200, body, "application/json")
                    return
                self._send(404, b"not found", "text/plain")

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.server.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/"

    def __enter__(self) -> Viewer:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
