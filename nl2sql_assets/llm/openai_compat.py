"""A lean async client for OpenAI-compatible chat endpoints (the gold LLM server, and providers
that speak that protocol), over aiohttp.

litellm spends about 4 s importing and ~6 ms of CPU per call on work we never use (its own cost
calculator, logging callbacks, scrubbing for logs, request building in threads); a plain POST
costs a tenth of a millisecond. aiohttp, not httpx: on the same POST to a local server httpx's
client spends about 0.85 ms of CPU a request (URL and header models, its auth and redirect
layers, anyio, and a pool that polls every idle socket twice a request), aiohttp about 0.11 ms
(``scripts/bench_plans.py`` shows the per-case difference). Only the wire is here: ``LLMClient``
(``llm/client.py``) keeps the retries, the deadline, usage accounting, error classification,
pricing and redaction for both paths; the response-size cap is the same ``transport`` guard,
counted here as the body streams in.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from nl2sql_assets.llm import transport
from nl2sql_assets.llm.providers import API_KEY_ENV

if TYPE_CHECKING:
    import aiohttp

OPENAI_API_BASE = "https://api.openai.com/v1"
#: The kwargs ``LLMClient`` builds that are not request-body fields.
_NOT_BODY = {"model", "messages", "timeout", "max_retries", "api_base", "api_key", "extra_headers"}
MAX_CONNECTIONS = 100


class ProviderHTTPError(RuntimeError):
    """The endpoint answered with an error status; ``status_code`` is read by the classification
    and the retry rule exactly as litellm's exceptions are."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(f"HTTP {status_code}: {message}")
        self.status_code = status_code


class ProviderResponseError(RuntimeError):
    """A 2xx answer that is not a chat completion (not JSON, no ``choices``)."""


class ProviderConnectionError(httpx.TransportError):
    """The connection failed or dropped mid-call. An ``httpx.TransportError``, so the shared
    classification in ``llm/client.py`` (transient; error kind ``transport``) reads it exactly as
    the litellm path's transport errors (the response cap's ``ResponseTooLarge`` is one too)."""


@dataclass(frozen=True)
class EncodedJSON:
    """A request-body field given as JSON text, encoded once and spliced into every body that
    carries it (the planner's response schema is 29 kB of JSON: encoding it per call cost more
    than the rest of the request)."""

    text: str


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """The certificate store, loaded once per process (about 16 ms), not once per event loop."""
    return httpx.create_ssl_context()


@dataclass
class _LoopSession:
    session: aiohttp.ClientSession
    closer: AsyncIterator[None]  # its ``aclose`` closes the session; the loop calls it at shutdown


_sessions: dict[asyncio.AbstractEventLoop, _LoopSession] = {}


async def _close_at_shutdown(session: aiohttp.ClientSession) -> AsyncIterator[None]:
    """An async generator the loop knows (its asyncgen hooks saw it start): ``asyncio.run`` (and
    every ``Runner``) closes such generators before closing the loop, and so this session, on
    the loop it belongs to, even when nobody called ``close_client``."""
    loop = asyncio.get_running_loop()
    try:
        yield
    finally:
        held = _sessions.get(loop)
        if held is not None and held.session is session:
            del _sessions[loop]
        await session.close()


async def _session() -> aiohttp.ClientSession:
    """One aiohttp session (a keep-alive connection pool) per event loop: a session belongs to
    the loop it was made on. aiohttp is imported on the first call, not with the package."""
    loop = asyncio.get_running_loop()
    held = _sessions.get(loop)
    if held is not None and not held.session.closed:
        return held.session
    for other in [other for other in _sessions if other.is_closed()]:  # loops gone: forget them
        _sessions.pop(other, None)
    import aiohttp

    connector = aiohttp.TCPConnector(limit=MAX_CONNECTIONS, ssl=_ssl_context())
    session = aiohttp.ClientSession(connector=connector, trust_env=False)
    closer = _close_at_shutdown(session)
    await closer.__anext__()
    _sessions[loop] = _LoopSession(session, closer)
    return session


async def close_client() -> None:
    """Close this event loop's connection pool (call it before the loop closes)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    held = _sessions.get(loop)
    if held is not None:
        await held.closer.aclose()


def api_key(model: str, key: str | None) -> str | None:
    """The key sent: the settings' own, else the provider's environment variable (as litellm reads it)."""
    if key:
        return key
    env = API_KEY_ENV.get(model.split("/", 1)[0])
    return os.environ.get(env) if env else None


def _error_message(raw: bytes, reason: str) -> str:
    try:
        body = json.loads(raw)
    except ValueError:
        return raw[:500].decode("utf-8", "replace") or reason
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    return json.dumps(body)[:500]


def encode_body(fields: dict[str, Any]) -> bytes:
    """The request body: ``fields`` as one JSON object, ``EncodedJSON`` values spliced in as given."""
    plain = {k: v for k, v in fields.items() if not isinstance(v, EncodedJSON)}
    text = json.dumps(plain)
    spliced = [f"{json.dumps(k)}: {v.text}" for k, v in fields.items() if isinstance(v, EncodedJSON)]
    if spliced:
        text = f"{text[:-1]}{', ' if plain else ''}{', '.join(spliced)}}}"
    return text.encode("utf-8")


async def _read_capped(response: aiohttp.ClientResponse) -> bytes:
    """The whole body, counted against the call's response cap (``transport.guard_responses``)
    as it arrives; an honest oversized ``Content-Length`` is refused before a byte is read."""
    guard = transport.current_guard()
    if guard is None:
        return await response.read()
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > guard.max_bytes:
        guard.exceeded = True
        response.close()
        raise transport.ResponseTooLarge(f"the response declares {declared} bytes, over {guard.max_bytes}")
    chunks: list[bytes] = []
    async for chunk in response.content.iter_any():
        guard.received += len(chunk)
        if guard.received > guard.max_bytes:
            guard.exceeded = True
            response.close()  # the connection is dropped, not drained
            raise transport.ResponseTooLarge(f"the response passed {guard.max_bytes} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def acompletion(*, model: str, messages: list[dict[str, Any]], api_base: str, timeout: float,
                      api_key: str | None = None, extra_headers: dict[str, str] | None = None,
                      **params: Any) -> dict[str, Any]:
    """POST one chat completion and return its JSON body (``choices``, ``usage``), as litellm's
    ``acompletion`` does for the same ``openai/...`` model; ``params`` go into the request body."""
    import aiohttp

    body: dict[str, Any] = {"model": model.split("/", 1)[1] if "/" in model else model, "messages": messages}
    body.update({k: v for k, v in params.items() if k not in _NOT_BODY})
    headers = {"Content-Type": "application/json", **(extra_headers or {})}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    session = await _session()
    try:
        async with session.post(f"{api_base.rstrip('/')}/chat/completions", data=encode_body(body),
                                headers=headers, timeout=aiohttp.ClientTimeout(total=timeout),
                                allow_redirects=False) as response:
            raw = await _read_capped(response)
            status, reason = response.status, response.reason or ""
    except (TimeoutError, transport.ResponseTooLarge):
        raise
    except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, aiohttp.ClientResponseError) as exc:
        raise ProviderConnectionError(f"{type(exc).__name__}: {exc}") from exc
    if status >= 400:
        raise ProviderHTTPError(status, _error_message(raw, reason))
    try:
        reply = json.loads(raw)
    except ValueError as exc:
        raise ProviderResponseError(f"the answer is not JSON: {raw[:200]!r}") from exc
    if not isinstance(reply, dict) or not isinstance(reply.get("choices"), list):
        raise ProviderResponseError("the answer has no choices")
    return reply
