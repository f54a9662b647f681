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
from typing import Any, ClassVar, Literal

from pydantic import Field, ValidationError

from nl2sql_assets.config import StrictModel
from nl2sql_assets.engines.contract import AskRequest, EngineReply, Turn
from nl2sql_assets.errors import validation_summary
from nl2sql_assets.redact import redact, register_secrets

#: error codes of replies the adapter writes itself
HTTP_ERROR, BAD_REPLY, UNREACHABLE, TOO_LARGE = "ENGINE_HTTP_ERROR", "ENGINE_BAD_REPLY", "ENGINE_UNREACHABLE", \
    "ENGINE_REPLY_TOO_LARGE"
_KIND_OF_STATUS = {401: "auth", 403: "auth", 404: "not_found"}


class HttpEngineConfig(StrictModel):
    """``engine: {kind: http, url, headers, timeout_s}`` (with retries and a reply size cap)."""

    kind: Literal["http"] = "http"
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_s: float = 60.0
    retries: int = 2
    max_reply_bytes: int = 32 * 1024 * 1024
    #: the engine puts cost_usd in every reply: only then may a run hold it under a dollar cap
    reports_cost: bool = False


class HttpEngine:
    """An ``NL2SQLEngine`` over HTTP."""

    #: its error replies about the way to the engine (``env_error``) are written here, never taken
    #: from the remote side: an engine cannot turn its own failure into an outage
    writes_env_errors: ClassVar[bool] = True

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
        last, kind = "", "transport"
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
                    kind = "rate_limit" if exc.code == 429 else "server"
                    continue
                # 401/403/404: the way to the engine is wrong (an outage of ours); another 4xx is the engine's
                return self._failed(HTTP_ERROR, last, started, _KIND_OF_STATUS.get(exc.code))
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                last = f"{self.url}: {reason}"
                kind = "timeout" if isinstance(reason, TimeoutError) or isinstance(exc, TimeoutError) else "transport"
                continue
            if len(raw) > self.config.max_reply_bytes:
                return self._failed(TOO_LARGE, f"{self.url}: the reply is over {self.config.max_reply_bytes} bytes",
                                    started)
            return self._parse(raw, started)
        return self._failed(UNREACHABLE, f"{last} (after {self.config.retries + 1} attempts)", started, kind)

    def _parse(self, raw: bytes, started: float) -> EngineReply:
        try:
            reply = EngineReply.model_validate_json(raw)
        except ValidationError as exc:
            return self._failed(BAD_REPLY, f"{self.url}: the reply breaks the contract: {validation_summary(exc)}",
                                started)
        timings = dict(reply.timings or {})
        timings["http"] = time.perf_counter() - started
        if reply.model_extra and "env_error" in reply.model_extra:
            del reply.model_extra["env_error"]  # the remote side's word for it is not taken (see writes_env_errors)
        return reply.model_copy(update={"timings": timings})

    def _failed(self, code: str, message: str, started: float, env_error: str | None = None) -> EngineReply:
        """An error reply of the adapter's own; ``env_error`` (an ``EnvErrorKind``) when the way to
        the engine failed (5xx, timeout, connection, auth), which is an outage, not the engine's answer."""
        return EngineReply(status="error", error_code=code, answer=redact(message),
                           timings={"http": time.perf_counter() - started}, env_error=env_error)
