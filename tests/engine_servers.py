"""Engines over HTTP for tests: a stdlib server in the test's process that answers SQL only from a
table of questions (reporting a cost and usage) and keeps the headers it was sent."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class RecordingEngine(ThreadingHTTPServer):
    """An engine in the test's process that answers SQL only and keeps the headers it was sent;
    with ``status`` (e.g. 503) it answers every request with that HTTP error instead."""

    def __init__(self, answers: dict[str, str], status: int = 200) -> None:
        self.answers, self.headers_seen = answers, []  # type: ignore[var-annotated]
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                server.headers_seen.append(dict(self.headers))
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if status != 200:
                    self.send_error(status)
                    return
                sql = server.answers.get(request["question"])
                body = json.dumps({"status": "answered", "sql": sql, "cost_usd": 0.001,
                                   "usage": {"prompt_tokens": 10, "completion_tokens": 5}}
                                  if sql else {"status": "unanswerable"}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()
