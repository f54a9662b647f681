"""A lean async client for OpenAI-compatible chat endpoints (the gold LLM server, and providers
that speak that protocol), over httpx.

litellm spends about 4 s importing and ~6 ms of CPU per call on work we never use (its own cost
calculator, logging callbacks, scrubbing for logs, request building in threads); a plain POST
costs under 1 ms. Only the wire is here: ``LLMClient`` (``llm/client.py``) keeps the retries,
the deadline, usage accounting, error classification, pricing and redaction for both paths, and
the response-size cap is the same ``transport.CappedTransport``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import ssl
import weakref
from typing import Any

import httpx

from nl2sql_assets.llm import transport
from nl2sql_assets.llm.providers import API_KEY_ENV

OPENAI_API_BASE = "https://api.openai.com/v1"
#: The kwargs ``LLMClient`` builds that are not request-body fields.
_NOT_BODY = {"model", "messages", "timeout", "max_retries", "api_base", "api_key", "extra_headers"}
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = weakref.WeakKeyDictionary()


class ProviderHTTPError(RuntimeError):
    """The endpoint answered with an error status; ``status_code`` is read by the classification
    and the retry rule exactly as litellm's exceptions are."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(f"HTTP {status_code}: {message}")
        self.status_code = status_code


class ProviderResponseError(RuntimeError):
    """A 2xx answer that is not a chat completion (not JSON, no ``choices``)."""


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """The certificate store, loaded once per process (about 16 ms), not once per event loop."""
    return httpx.create_ssl_context()


def _client() -> httpx.AsyncClient:
    """One connection pool per event loop (an httpx client belongs to the loop it first ran on)."""
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None or client.is_closed:
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=20)
        client = httpx.AsyncClient(transport=transport.CappedTransport(
            httpx.AsyncHTTPTransport(verify=_ssl_context(), limits=limits)),
                                   trust_env=False)
        _clients[loop] = client
    return client


async def close_client() -> None:
    """Close this event loop's connection pool (call it before the loop closes)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    client = _clients.pop(loop, None)
    if client is not None:
        await client.aclose()


def api_key(model: str, key: str | None) -> str | None:
    """The key sent: the settings' own, else the provider's environment variable (as litellm reads it)."""
    if key:
        return key
    env = API_KEY_ENV.get(model.split("/", 1)[0])
    return os.environ.get(env) if env else None


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500] or response.reason_phrase
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    return json.dumps(body)[:500]


async def acompletion(*, model: str, messages: list[dict[str, Any]], api_base: str, timeout: float,
                      api_key: str | None = None, extra_headers: dict[str, str] | None = None,
                      **params: Any) -> dict[str, Any]:
    """POST one chat completion and return its JSON body (``choices``, ``usage``), as litellm's
    ``acompletion`` does for the same ``openai/...`` model; ``params`` go into the request body."""
    body: dict[str, Any] = {"model": model.split("/", 1)[1] if "/" in model else model, "messages": messages}
    body.update({k: v for k, v in params.items() if k not in _NOT_BODY})
    headers = {"Content-Type": "application/json", **(extra_headers or {})}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    response = await _client().post(f"{api_base.rstrip('/')}/chat/completions", content=json.dumps(body),
                                     headers=headers, timeout=timeout)
    if response.status_code >= 400:
        raise ProviderHTTPError(response.status_code, _error_message(response))
    try:
        reply = response.json()
    except ValueError as exc:
        raise ProviderResponseError(f"the answer is not JSON: {response.text[:200]!r}") from exc
    if not isinstance(reply, dict) or not isinstance(reply.get("choices"), list):
        raise ProviderResponseError("the answer has no choices")
    return reply
