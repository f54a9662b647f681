"""A size cap on model responses, enforced while the body streams in, under litellm.

litellm reads an OpenAI-compatible response through an httpx client whose transport it builds
with ``AsyncHTTPHandler.create_async_transport`` (aiohttp by default); the SDK then buffers the
whole body before parsing it, so a 60 MB answer costs 60 MB (and more) of memory before anyone
can look at it. ``install`` wraps every transport litellm creates: each response body is counted
as it arrives and the read is aborted past the cap of the call in progress (a ContextVar the
client sets around each attempt; requests made outside such a call are not capped). The
declared ``Content-Length`` is checked first, so an honest oversized answer is refused before a
byte of it is read.
"""

from __future__ import annotations

import contextvars
import dataclasses
import inspect
from collections.abc import AsyncIterator
from typing import Any

import httpx


@dataclasses.dataclass
class ResponseGuard:
    """One attempt's budget: ``received`` bytes so far; ``exceeded`` once the cap was passed."""

    max_bytes: int
    received: int = 0
    exceeded: bool = False


_GUARD: contextvars.ContextVar[ResponseGuard | None] = contextvars.ContextVar("nl2sql_response_guard", default=None)


class ResponseTooLarge(httpx.TransportError):
    """The response body passed the cap; the connection is dropped."""


def guard_responses(max_bytes: int) -> tuple[ResponseGuard, contextvars.Token[ResponseGuard | None]]:
    """Cap the responses of the calls made from here on in this context (``release`` undoes it)."""
    guard = ResponseGuard(max_bytes)
    return guard, _GUARD.set(guard)


def current_guard() -> ResponseGuard | None:
    """The cap of the call in progress in this context (None outside a guarded call)."""
    return _GUARD.get()


def release(token: contextvars.Token[ResponseGuard | None]) -> None:
    _GUARD.reset(token)


class _CappedStream(httpx.AsyncByteStream):
    def __init__(self, inner: Any, guard: ResponseGuard) -> None:
        self._inner = inner
        self._guard = guard

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._guard.received += len(chunk)
            if self._guard.received > self._guard.max_bytes:
                self._guard.exceeded = True
                raise ResponseTooLarge(f"the response passed {self._guard.max_bytes} bytes")
            yield chunk

    async def aclose(self) -> None:
        close = getattr(self._inner, "aclose", None)
        if close is not None:
            await close()


class CappedTransport(httpx.AsyncBaseTransport):
    """Delegates to litellm's transport; counts and caps each response body of a guarded call."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        guard = _GUARD.get()
        if guard is None:
            return response
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > guard.max_bytes:
            guard.exceeded = True
            await response.aclose()
            raise ResponseTooLarge(f"the response declares {declared} bytes, over {guard.max_bytes}")
        response.stream = _CappedStream(response.stream, guard)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __getattr__(self, name: str) -> Any:  # anything else litellm asks of its transport
        return getattr(self._inner, name)


def install(lib: Any) -> bool:
    """Wrap every async transport ``lib`` (litellm) creates from now on. False when this litellm
    has no such hook (then only the deadline holds)."""
    try:
        from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler
    except ImportError:
        return False
    original = getattr(AsyncHTTPHandler, "create_async_transport", None)
    if original is None:
        return False
    if getattr(original, "_nl2sql_capped", False):
        return True
    signature = inspect.signature(original)

    def create_async_transport(*args: Any, **kwargs: Any) -> httpx.AsyncBaseTransport:
        inner = original(*args, **kwargs)
        if inner is None:  # litellm lets httpx build its default transport: build it here instead
            bound = signature.bind_partial(*args, **kwargs).arguments
            ssl_context, ssl_verify = bound.get("ssl_context"), bound.get("ssl_verify")
            verify = ssl_context if ssl_context is not None else ssl_verify is not False
            extra = {"limits": bound["limits"]} if "limits" in bound else {}
            inner = httpx.AsyncHTTPTransport(verify=verify, cert=bound.get("cert"), **extra)
        return CappedTransport(inner)

    create_async_transport._nl2sql_capped = True  # type: ignore[attr-defined]
    AsyncHTTPHandler.create_async_transport = staticmethod(create_async_transport)  # type: ignore[method-assign]
    return True
