"""Hostile OpenAI-compatible endpoints on 127.0.0.1, for the tests of the LLM client's guards.

``HostileServer`` answers every chat completion one bad way: ``trickle`` (a valid answer, one
byte a second), ``huge`` (a 60 MB answer, with a Content-Length or chunked), ``echo`` (a 401
whose error text repeats the request's Authorization header) or ``bad`` (an unparsable answer
of a given size). ``EchoGateway`` sits in front of a gold LLM server and repeats the
Authorization header into what the engine keeps: routing reasons, answers and error texts.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from nl2sql_assets.llm.client import RUN_ID_HEADER


def completion(content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-hostile", "object": "chat.completion", "created": 1, "model": "hostile",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Base:
    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((dict(self.headers), body))
                with contextlib.suppress(OSError):  # the client gave up, as it should
                    outer.respond(self, body)

        self.server = _Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def respond(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:  # pragma: no cover
        raise NotImplementedError

    @staticmethod
    def send(handler: BaseHTTPRequestHandler, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class HostileServer(_Base):
    def __init__(self, mode: str, *, size: int = 60_000_000, chunked: bool = False) -> None:
        self.mode, self.size, self.chunked = mode, size, chunked
        super().__init__()

    def respond(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        if self.mode == "echo":
            auth = handler.headers.get("Authorization")
            self.send(handler, 401, {"error": {"message": f"Incorrect API key provided: {auth}",
                                               "type": "invalid_request_error"}})
        elif self.mode == "bad":
            self.send(handler, 200, completion("not json " + "x" * self.size))
        elif self.mode == "trickle":
            data = json.dumps(completion('{"total": 1, "label": "x"}')).encode()
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            for byte in data:
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
                time.sleep(1.0)
        elif self.mode == "huge":
            self._huge(handler)

    def _huge(self, handler: BaseHTTPRequestHandler) -> None:
        head = json.dumps(completion("@")).encode().split(b"@")
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        if self.chunked:
            handler.send_header("Transfer-Encoding", "chunked")
        else:
            handler.send_header("Content-Length", str(self.size))
        handler.end_headers()

        def write(part: bytes) -> None:
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(part), part) if self.chunked else part)

        write(head[0])
        left, block = self.size - len(head[0]) - len(head[1]), b"x" * 65536
        while left > 0:
            write(block[: min(left, len(block))])
            left -= len(block)
        write(head[1])
        if self.chunked:
            handler.wfile.write(b"0\r\n\r\n")


class EchoGateway(_Base):
    """Forwards to a gold LLM server, then repeats the caller's Authorization header in what comes
    back: the resolver's reason, the synthesized answer, every error text, and a 401 for the
    first plan asked."""

    def __init__(self, gold_base_url: str) -> None:
        self.gold = gold_base_url
        self.plans_refused = 0
        super().__init__()

    def respond(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        auth = handler.headers.get("Authorization") or ""
        schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("name")
        if schema == "PlanModel" and self.plans_refused == 0:
            self.plans_refused += 1
            self.send(handler, 401, {"error": {"message": f"gateway: bad credentials {auth}",
                                               "type": "invalid_request_error"}})
            return
        request = urllib.request.Request(f"{self.gold}/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json",
                                                  RUN_ID_HEADER: handler.headers.get(RUN_ID_HEADER) or ""})
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                status, payload = reply.status, json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            status, payload = exc.code, json.loads(exc.read())
        if status != 200:  # e.g. a run the gold server does not know: the error repeats the header too
            payload["error"]["message"] = f"{payload['error']['message']} (authorised as {auth})"
        else:
            message = payload["choices"][0]["message"]
            answer = json.loads(message["content"])
            if schema == "DatasourceSelection":
                answer["reason"] = f"{answer.get('reason', '')} (authorised as {auth})"
            elif schema == "SynthesizedAnswer":
                answer["summary"] = f"{answer['summary']} Your key was {auth}."
            message["content"] = json.dumps(answer)
        self.send(handler, status, payload)
