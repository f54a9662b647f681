"""The reference engine server (``nl2sql-assets serve``): any ``NL2SQLEngine`` behind ``POST /ask``.

Stdlib HTTP, one thread per request. A body that breaks the contract is answered 400 with the
field named; an engine that raises is answered 500 with the error's type (its message redacted),
so a client can test itself against the built-in engine before writing its own server.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import ValidationError

from nl2sql_assets.engines.contract import AskRequest, NL2SQLEngine
from nl2sql_assets.errors import UserError, validation_summary
from nl2sql_assets.redact import redact

MAX_REQUEST_BYTES = 1024 * 1024


class _Handler(BaseHTTPRequestHandler):
    server: EngineServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the caller keeps its own log
        return

    def _send(self, code: int, payload: dict[str, Any]) -> None:
        body = json.dumps(payload, default=str).encode("utf-8")
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/health":
            self._send(200, {"status": "ok"})
        else:
            self._send(404, {"error": f"no {self.path}: POST /ask"})

    def do_POST(self) -> None:
        if self.path != "/ask":
            self._send(404, {"error": f"no {self.path}: POST /ask"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_REQUEST_BYTES:
            self._send(413, {"error": f"the request is over {MAX_REQUEST_BYTES} bytes"})
            return
        try:
            request = AskRequest.model_validate_json(self.rfile.read(length))
        except ValidationError as exc:
            self._send(400, {"error": f"the request breaks the contract: {validation_summary(exc)}"})
            return
        try:
            ask: Any = self.server.engine.ask
            kwargs = {"context": request.context} if request.context is not None else {}
            reply = ask(request.question, request.role, request.datasource, request.conversation, **kwargs)
        except UserError as exc:  # an unknown role or datasource: the caller's mistake
            self._send(400, {"error": redact(str(exc))})
            return
        except Exception as exc:
            self._send(500, {"error": f"{type(exc).__name__}: {redact(str(exc))}"})
            return
        self._send(200, reply.model_dump(mode="json"))


class EngineServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, engine: NL2SQLEngine, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__((host, port), _Handler)
        self.engine = engine

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> threading.Thread:
        """Serve on a daemon thread (tests, embedding); ``shutdown()`` stops it."""
        thread = threading.Thread(target=self.serve_forever, name="engine-server", daemon=True)
        thread.start()
        return thread
