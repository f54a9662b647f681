"""An engine behind HTTP: ``POST {url}/ask`` with the contract's JSON (docs/engine-api.openapi.yaml).

Guarded as model calls are: a deadline per attempt, retries with backoff on connection failures,
429 and 5xx (a 4xx other than 429 is the engine refusing the request: not retried), a cap on the
reply's size, and the configured headers' values (``${env:...}`` secrets) redacted from every
message. A reply that breaks the contract is an error naming the field, never a guess.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, ValidationError

from nl2sql_assets.config import StrictModel
from nl2sql_assets.engines.contract import AskRequest, EngineReply, Turn
from nl2sql_assets.errors import validation_summary
from nl2sql_assets.redact import redact, register_secrets

#: error codes of replies the adapter writes itself
HTTP_ERROR, BAD_REPLY, UNREACHABLE, TOO_LARGE = "ENGINE_HTTP_ERROR", "ENGINE_BAD_REPLY", "ENGINE_UNREACHABLE", \
    "ENGINE_REPLY_TOO_LARGE"


class HttpEngineConfig(StrictModel):
    """``engine: {kind: http, url, headers, timeout_s}`` (with retries and a reply size cap)."""

    kind: Literal["http"] = "http"
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_s: float = 60.0
    retries: int = 2
    max_reply_bytes: int = 32 * 1024 * 1024


class HttpEngine:
    """An ``NL2SQLEngine`` over HTTP."""

    def __init__(self, config: HttpEngineConfig) -> None:
        self.config = config
        self.url = config.url.rstrip("/") + "/ask"
        register_secrets(config.headers.values())  # never in a message, a log or a record

    def ask(self, question: str, role: str, datasource: str | None = None,
            conversation: Sequence[Turn] | None = None, context: dict[str, Any] | None = None) -> EngineReply:
        body = AskRequest(question=question, role=role, datasource=datasource, conversation=list(conversation or ()),
                          context=context).model_dump(mode="json", exclude_none=True)
        data = json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json", **self.config.headers}
        started = time.perf_counter()
        last = ""
        for attempt in range(self.config.retries + 1):
            if attempt:
                time.sleep(min(0.25 * 2 ** (attempt - 1), 2.0))
            request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.config.timeout_s) as response:
                    raw = response.read(self.config.max_reply_bytes + 1)
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code} from {self.url}: {exc.read(500).decode('utf-8', 'replace')}"
                if exc.code == 429 or exc.code >= 500:
                    continue
                return self._failed(HTTP_ERROR, last, started)
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                last = f"{self.url}: {getattr(exc, 'reason', exc)}"
                continue
            if len(raw) > self.config.max_reply_bytes:
                return self._failed(TOO_LARGE, f"{self.url}: the reply is over {self.config.max_reply_bytes} bytes",
                                    started)
            return self._parse(raw, started)
        return self._failed(UNREACHABLE, f"{last} (after {self.config.retries + 1} attempts)", started)

    def _parse(self, raw: bytes, started: float) -> EngineReply:
        try:
            reply = EngineReply.model_validate_json(raw)
        except ValidationError as exc:
            return self._failed(BAD_REPLY, f"{self.url}: the reply breaks the contract: {validation_summary(exc)}",
                                started)
        timings = dict(reply.timings or {})
        timings["http"] = time.perf_counter() - started
        return reply.model_copy(update={"timings": timings})

    def _failed(self, code: str, message: str, started: float) -> EngineReply:
        return EngineReply(status="error", error_code=code, answer=redact(message),
                           timings={"http": time.perf_counter() - started})
