"""The one way the engine calls a model: a JSON-schema response format, pydantic parsing, over
litellm or, for OpenAI-compatible endpoints, our own lean client (``llm/openai_compat.py``).

Each call records what the provider billed (input, cached, cache-write, output, reasoning
tokens), how long it took and how many attempts it needed. Transient failures (timeouts,
dropped connections, 429, 5xx) are retried with jittered exponential backoff; a 4xx never
is. litellm is imported on first use only: importing it costs seconds. Which path a call takes
is ``ModelSettings.api`` (``uses_openai_compatible``); everything here but the wire is shared.

Hostile or broken endpoints are contained: ``timeout_s`` is a total deadline per attempt
(connect, headers and body), a response body over ``max_response_bytes`` is an error detected
while it streams in (``llm/transport.py``), a parse retry sends back only a short excerpt of
the bad answer, and every provider text (answers and errors) passes through ``redact`` here,
at the source, so an echoed key never reaches a result, a record or a log.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import random
import threading
import time
import warnings
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from nl2sql_assets.config import ModelSettings
from nl2sql_assets.llm import openai_compat, transport
from nl2sql_assets.llm.calls import EnvErrorKind, LLMCall, TokenSource, Usage, combine_sources
from nl2sql_assets.llm.providers import API_KEY_ENV
from nl2sql_assets.llm.spend import CALL_GUARD, CapReached
from nl2sql_assets.redact import protect_logger, redact

T = TypeVar("T", bound=BaseModel)
R = TypeVar("R")

RUN_ID_HEADER = "X-NL2SQL-Run-Id"
BACKOFF_BASE_S = 0.2
BACKOFF_CAP_S = 5.0
RETRY_EXCERPT_CHARS = 300  # how much of an unparsable answer a parse retry sends back
_TRANSIENT_STATUS = {408, 409, 429}
# Loggers that may carry provider text (litellm's own, and the HTTP stacks under it).
_PROVIDER_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm", "httpx", "httpcore", "openai",
                     "aiohttp.client")

#: What pydantic says of litellm's ReadOnly TypedDict items (filtered here and in the pytest config).
LITELLM_READONLY_WARNING = r".* (is|are) using the `ReadOnly` qualifier\. Pydantic will not protect items"
_litellm: Any = None
_lib_lock = threading.Lock()
_free_models: set[str] = set()


def _lib() -> Any:
    """litellm, imported once, offline (its local price map) and quiet."""
    global _litellm
    if _litellm is not None:
        return _litellm
    with _lib_lock:
        if _litellm is None:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            # pydantic warns, once per class, that litellm's TypedDicts mark items ReadOnly (it
            # cannot enforce that): about 13 lines of noise at a run's first call, nothing to act on
            warnings.filterwarnings("ignore", message=LITELLM_READONLY_WARNING, category=UserWarning)
            import litellm

            litellm.suppress_debug_info = True
            litellm.telemetry = False
            transport.install(litellm)
            _skip_cost_calculator()
            for name in _PROVIDER_LOGGERS:
                protect_logger(name)
            for model in sorted(_free_models):
                _register_free(litellm, model)
            _litellm = litellm
    return _litellm


#: (owner, attribute) → litellm's own, for what ``_skip_cost_calculator`` replaced (benchmarks put them back).
SWITCHED_OFF: dict[tuple[Any, str], Any] = {}


def _no_cost(*_args: Any, **_kwargs: Any) -> None:
    return None


async def _no_cost_async(*_args: Any, **_kwargs: Any) -> None:
    return None


def _skip_cost_calculator() -> None:
    """Switch off litellm's own pricing of every response (its cost calculator: model-name rule
    searches and cost-map lookups per call). We price calls ourselves (``llm/prices.py``) and never
    read litellm's figure; ``scripts/bench_plans.py --litellm-switches`` measures each of
    litellm's per-call extras, and this one was the one that saved CPU. Where a litellm
    version lacks these hooks, nothing is changed."""
    try:
        from litellm.litellm_core_utils.litellm_logging import Logging
    except ImportError:
        return
    for name, replacement in (("_response_cost_calculator", _no_cost), ("response_cost_calculator", _no_cost),
                              ("_response_cost_calculator_async", _no_cost_async)):
        original = getattr(Logging, name, None)
        if callable(original) and original not in (_no_cost, _no_cost_async):
            SWITCHED_OFF[(Logging, name)] = original
            setattr(Logging, name, replacement)


async def release_logging_worker() -> None:
    """Stop litellm's logging worker if it runs on this event loop (call it once this loop's LLM
    work is done).

    litellm keeps one logging task per process and moves it to whichever loop calls next; the
    task it leaves behind on a loop that stays open (the engine's background loop) is dropped
    while pending and destroyed later ("Task was destroyed but it is pending!"). We register no
    litellm callbacks, so there is nothing to flush; the next call starts the worker again."""
    if _litellm is None:
        return
    try:
        from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER as worker
    except ImportError:  # a litellm without the worker
        return
    # A call hands its log to a task of its own, which starts the worker on its first step: let
    # the tasks spawned by the calls that just ended take that step first.
    for _ in range(2):
        await asyncio.sleep(0)
    task = getattr(worker, "_worker_task", None)
    if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
        return
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(worker.flush(), 2.0)  # the logs already queued run first
    await worker.stop()


async def releasing(coro: Coroutine[Any, Any, R]) -> R:
    """``coro``, then litellm's logging worker flushed and stopped if it runs on this loop."""
    try:
        return await coro
    finally:
        await release_logging_worker()


def run_on_new_loop(coro: Coroutine[Any, Any, R]) -> R:
    """``asyncio.run(coro)`` for work that calls models: litellm's logging worker is done and the
    lean client's connections are closed before the loop closes, so nothing of either is carried
    to (or left pending on) another loop."""

    results: list[R] = []

    async def closing() -> None:
        try:
            results.append(await releasing(coro))
        finally:
            await openai_compat.close_client()

    # The result goes beside the main task, not in it: Python 3.11's asyncio.run writes the
    # task's repr (the result's included) when it puts the SIGINT handler back, and the repr
    # of a whole run's records took tens of milliseconds.
    asyncio.run(closing())
    return results[0]


def uses_openai_compatible(settings: ModelSettings) -> bool:
    """Whether a call goes through the lean OpenAI-compatible client: ``api: openai-compatible``,
    or ``api: auto`` (the default) for an ``openai/...`` model on a base URL of its own (a
    server that speaks OpenAI's protocol). Everything else goes through litellm."""
    if settings.api == "auto":
        return bool(settings.api_base) and settings.model.startswith("openai/")
    return settings.api == "openai-compatible"


def _register_free(lib: Any, model: str) -> None:
    if model in lib.model_cost:  # litellm knows it already: never change a real model's price
        return
    zero = {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0, "cache_read_input_token_cost": 0.0,
            "cache_creation_input_token_cost": 0.0}  # fmt: skip
    lib.register_model({model: {**zero, "litellm_provider": model.split("/", 1)[0], "mode": "chat"}})


def declare_free_model(model: str) -> None:
    """Tell litellm that ``model`` (``provider/name``, e.g. the gold LLM's) costs nothing.

    litellm prices every response itself. For a model missing from its cost map that means
    searching its fallback rules (about a thousand regexes) on every call, ~10 % of its
    per-call overhead; a known model is a dict lookup. Our own pricing (``llm/prices.py``)
    never reads litellm's cost, and the request sent is byte-for-byte the same. Cheap before
    litellm is imported: the name is registered when it is.
    """
    with _lib_lock:
        _free_models.add(model)
        if _litellm is not None:
            _register_free(_litellm, model)


def _missing_key(lib: Any, model: str, api_base: str | None) -> str:
    """The environment variables the provider of ``model`` needs and lacks ('' when none)."""
    found = lib.validate_environment(model=model, api_base=api_base)
    return "" if found.get("keys_in_environment", True) else ", ".join(found.get("missing_keys") or [])


class LLMCallError(RuntimeError):
    """A node's model call failed after its retries; ``call`` is what was recorded."""

    def __init__(self, message: str, call: LLMCall) -> None:
        super().__init__(message)
        self.call = call


def _loaded() -> Any:
    """litellm if a call has imported it (its exception types), else None: classifying an error
    of the lean client must not import it."""
    return _litellm


def is_transient(exc: BaseException) -> bool:
    """Worth another try: timeouts, connection errors, 429 and 5xx. Auth and bad requests are not."""
    if isinstance(exc, httpx.TransportError | asyncio.TimeoutError):
        return True
    lib = _loaded()
    transient_types = tuple(
        t
        for t in (
            getattr(lib, "Timeout", None),
            getattr(lib, "APIConnectionError", None),
            getattr(lib, "RateLimitError", None),
            getattr(lib, "InternalServerError", None),
            getattr(lib, "ServiceUnavailableError", None),
            getattr(lib, "BadGatewayError", None),
        )
        if isinstance(t, type)
    ) if lib is not None else ()
    if isinstance(exc, transient_types):
        return True
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return status >= 500 or status in _TRANSIENT_STATUS
    return False


def _get(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def usage_from_response(response: Any) -> Usage | None:
    """Token counts as the provider reported them; missing fields are 0, a missing (or all-zero) block is None."""
    usage = _get(response, "usage")
    if usage is None:
        return None
    if not (_int(_get(usage, "prompt_tokens")) or _int(_get(usage, "completion_tokens"))):
        # litellm fills an all-zero block when the provider sent none; no real call reads 0 tokens.
        return None
    prompt_details = _get(usage, "prompt_tokens_details")
    completion_details = _get(usage, "completion_tokens_details")
    cached = _int(_get(prompt_details, "cached_tokens")) or _int(_get(usage, "cache_read_input_tokens"))
    return Usage(
        input_tokens=_int(_get(usage, "prompt_tokens")),
        cached_tokens=cached,
        cache_write_tokens=_int(_get(usage, "cache_creation_input_tokens")),
        output_tokens=_int(_get(usage, "completion_tokens")),
        reasoning_tokens=_int(_get(completion_details, "reasoning_tokens")),
    )


def _content(response: Any) -> str:
    choices = _get(response, "choices") or []
    if not choices:
        return ""
    message = _get(choices[0], "message")
    content = _get(message, "content")
    return content if isinstance(content, str) else ""


def parse_output(content: str, output_model: type[T]) -> T:
    """The message content as ``output_model``; tolerates a ```json fence around it."""
    text = content.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0]
    return output_model.model_validate_json(text)


@functools.cache
def _schema_json(output_model: type[BaseModel]) -> str:
    # Building PlanModel's schema takes ~6 ms; a JSON copy is ~0.2 ms and litellm may mutate it.
    return json.dumps(output_model.model_json_schema())


def response_format_for(output_model: type[BaseModel]) -> dict[str, Any]:
    """The structured-output request: the model's JSON schema, named after the class (not strict)."""
    return {
        "type": "json_schema",
        "json_schema": {
            "name": output_model.__name__,
            "schema": json.loads(_schema_json(output_model)),
            "strict": False,
        },
    }


@functools.cache
def _response_format_json(output_model: type[BaseModel]) -> str:
    """``response_format_for(output_model)`` as JSON text, encoded once per model."""
    return json.dumps(response_format_for(output_model))


def backoff_delay(attempt: int) -> float:
    """Seconds before retry ``attempt`` (1-based): 0.2, 0.4, 0.8 ... jittered by ±25 %, capped."""
    base = min(BACKOFF_BASE_S * (2 ** (attempt - 1)), BACKOFF_CAP_S)
    return base * random.uniform(0.75, 1.25)


def env_error_kind(exc: BaseException) -> tuple[EnvErrorKind | None, int | None]:
    """(kind, HTTP status) of a failed attempt when the environment failed it (auth, quota,
    rate limit, 5xx, timeout, transport); (None, status) for a request the provider judged bad."""
    lib = _loaded()
    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None
    timeout_type = getattr(lib, "Timeout", None)
    if isinstance(exc, TimeoutError | asyncio.TimeoutError | httpx.TimeoutException) or (
        isinstance(timeout_type, type) and isinstance(exc, timeout_type)
    ) or status == 408:
        return "timeout", status if status == 408 else None
    connection_type = getattr(lib, "APIConnectionError", None)
    if isinstance(connection_type, type) and isinstance(exc, connection_type):
        return "transport", None
    if _dropped_connection(exc):  # litellm reports some as a 500 "Connection error."
        return "transport", None
    if status in (401, 403):
        return "auth", status
    if status == 402:
        return "quota", status
    if status == 429:
        return "rate_limit", status
    if status == 404:
        return "not_found", status
    if status is not None and status >= 500:
        return "server", status
    return None, status


def _dropped_connection(exc: BaseException) -> bool:
    """The exception, or one it was raised from, is a connection that failed or dropped."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError | httpx.TransportError) or type(current).__name__ == "APIConnectionError":
            return True
        current = current.__cause__ or current.__context__
    return "Connection error" in str(exc)


class _Tally:
    """One call's tokens over its attempts: measured where the provider reported usage, counted
    with the model's tokenizer (litellm's ``token_counter``) where it did not."""

    def __init__(self, model: str, output_model: type[BaseModel]) -> None:
        self.model = model
        self.schema = _schema_json(output_model)  # sent with every request, billed as input
        self.usage: Usage | None = None
        self._sources: list[TokenSource] = []

    @property
    def source(self) -> TokenSource | None:
        return combine_sources(self._sources)

    def _add(self, usage: Usage, source: TokenSource) -> None:
        self.usage = usage if self.usage is None else self.usage + usage
        self._sources.append(source)

    def answered(self, usage: Usage | None, messages: list[dict[str, Any]], content: str) -> None:
        if usage is not None:
            self._add(usage, "measured")
        else:
            self._add(Usage(input_tokens=self._prompt(messages), output_tokens=count_tokens(self.model, content)),
                      "estimated")

    def failed_attempt(self, messages: list[dict[str, Any]], *, worked: bool) -> None:
        """A failed attempt: its prompt when the provider may have worked on it, else nothing."""
        if worked:
            self._add(Usage(input_tokens=self._prompt(messages)), "estimated")
        elif self.usage is None:
            self.usage = Usage()  # a request went out and was refused: zero tokens, known

    def _prompt(self, messages: list[dict[str, Any]]) -> int:
        return count_tokens(self.model, messages=messages) + count_tokens(self.model, self.schema)


def count_tokens(model: str, text: str = "", *, messages: list[dict[str, Any]] | None = None) -> int:
    """Tokens of ``text`` (or ``messages``) by the model's tokenizer as litellm knows it (a
    generic one for a model it does not know); about four characters a token if that fails."""
    try:
        if messages is not None:
            return int(_lib().token_counter(model=model, messages=messages))
        return int(_lib().token_counter(model=model, text=text)) if text else 0
    except Exception:
        chars = sum(len(str(m.get("content") or "")) for m in messages) if messages is not None else len(text)
        return chars // 4 + 1


class LLMClient:
    """Structured calls per node; ``settings_for_node`` is usually ``LLMConfig.for_node``."""

    def __init__(self, settings_for_node: Callable[[str], ModelSettings]) -> None:
        self._settings_for_node = settings_for_node

    def settings(self, node: str) -> ModelSettings:
        return self._settings_for_node(node)

    async def structured(
        self,
        node: str,
        messages: list[dict[str, Any]],
        output_model: type[T],
        *,
        run_id: str | None = None,
    ) -> tuple[T, LLMCall]:
        """One node's call: the parsed output and its record. Raises LLMCallError when it fails.

        Attempts = 1 + ``max_retries``; a transient error or (once) an unparsable answer uses one.
        Usage is summed over every attempt, failed ones included: what the provider reported, or
        our own count with the model's tokenizer where it reported nothing (``token_source``).
        """
        settings = self.settings(node)
        lean = uses_openai_compatible(settings)
        if lean:
            lib = None
            missing = "" if settings.api_base or openai_compat.api_key(settings.model, settings.api_key) \
                else API_KEY_ENV.get(settings.model.split("/", 1)[0], "the provider's key")
        else:
            lib = _lib()
            missing = "" if settings.api_key else _missing_key(lib, settings.model, settings.api_base)
        if missing:
            # Without a key the provider fails in ways that read like an outage; say what is wrong.
            message = f"{node}: no API key for {settings.model}: set {missing} or api_key in the llm section"
            raise LLMCallError(message, LLMCall(node=node, model=settings.model, usage=None, attempts=0,
                                                error=message))
        kwargs = self._kwargs(settings, output_model, run_id, lean=lean)
        if lean:
            kwargs["api_base"] = settings.api_base or openai_compat.OPENAI_API_BASE
            kwargs["api_key"] = openai_compat.api_key(settings.model, settings.api_key)
        send = openai_compat.acompletion if lean else lib.acompletion
        msgs = list(messages)
        max_attempts = 1 + settings.max_retries
        tally = _Tally(settings.model, output_model)
        parse_retry_used = False
        attempts = 0
        started = time.perf_counter()
        last_error = "no attempt made"
        kind: EnvErrorKind | None = None
        status: int | None = None
        spend_guard = CALL_GUARD.get()
        while attempts < max_attempts:
            if spend_guard is not None:  # before every attempt: a retry is billed like a call
                try:
                    spend_guard.before_call(node, settings.model)
                except CapReached:
                    if attempts:  # the attempts made so far went out and are paid for
                        spend_guard.after_call(self._record(node, settings.model, tally, started, attempts,
                                                            error="stopped by the cost cap"))
                    raise
            attempts += 1
            guard, token = transport.guard_responses(settings.max_response_bytes)
            try:
                # One deadline for the whole attempt: connecting, the headers and the body.
                async with asyncio.timeout(settings.timeout_s):  # no task per call, unlike wait_for
                    response = await send(messages=msgs, **kwargs)
            except Exception as exc:
                if guard.exceeded:  # a property of the answer, not of the moment: never retried
                    tally.failed_attempt(msgs, worked=True)
                    last_error = f"the response passed the {settings.max_response_bytes}-byte cap (max_response_bytes)"
                    kind, status = None, None
                    break
                kind, status = env_error_kind(exc)
                # A rejected request (401, 402, 403, 404, 429) did no work; a timeout, a 5xx or
                # a dropped connection may have been billed: its prompt is counted.
                tally.failed_attempt(msgs, worked=kind in ("timeout", "server", "transport"))
                if isinstance(exc, TimeoutError):
                    last_error = f"Timeout: no complete response within the {settings.timeout_s:g} s deadline (timeout_s)"
                else:
                    last_error = redact(f"{type(exc).__name__}: {_short(exc)}")
                if is_transient(exc) and attempts < max_attempts:
                    await asyncio.sleep(backoff_delay(attempts))
                    continue
                break
            finally:
                transport.release(token)
            kind, status = None, None
            content = redact(_content(response))
            tally.answered(usage_from_response(response), msgs, content)
            try:
                parsed = parse_output(content, output_model)
            except (ValidationError, ValueError) as exc:
                last_error = redact(f"unparsable {output_model.__name__} output: {_short(exc)}")
                if parse_retry_used or attempts >= max_attempts:
                    break
                parse_retry_used = True
                msgs = [
                    *msgs,
                    # Only an excerpt goes back: a huge or hostile answer is not sent again in full.
                    {"role": "assistant", "content": _excerpt(content, RETRY_EXCERPT_CHARS)},
                    {
                        "role": "user",
                        "content": "That answer did not match the required JSON schema "
                        f"{output_model.__name__}:\n{_short(exc, RETRY_EXCERPT_CHARS)}\n"
                        "Reply again with only a JSON object that matches the schema.",
                    },
                ]
                continue
            done = self._record(node, settings.model, tally, started, attempts)
            if spend_guard is not None:
                spend_guard.after_call(done)
            return parsed, done
        call = self._record(node, settings.model, tally, started, attempts, error=last_error, kind=kind,
                            status=status)
        if spend_guard is not None:
            spend_guard.after_call(call)
        what = f"{kind} error (HTTP {status})" if kind and status else f"{kind} error" if kind else "failed"
        raise LLMCallError(f"{node}: model call {what} after {attempts} attempt(s): {last_error}", call)

    @staticmethod
    def _record(node: str, model: str, tally: _Tally, started: float, attempts: int,
                error: str | None = None, kind: EnvErrorKind | None = None, status: int | None = None) -> LLMCall:
        """The call as QueryResult keeps it: the node's configured model, usage over all attempts."""
        return LLMCall(node=node, model=model, usage=tally.usage, token_source=tally.source,
                       latency_ms=(time.perf_counter() - started) * 1000.0, attempts=attempts, error=error,
                       error_kind=kind, status_code=status)

    @staticmethod
    def _kwargs(settings: ModelSettings, output_model: type[BaseModel], run_id: str | None, *,
                lean: bool = False) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": settings.model,
            # The lean wire splices the same JSON, encoded once; litellm gets a dict of its own.
            "response_format": openai_compat.EncodedJSON(_response_format_json(output_model)) if lean
            else response_format_for(output_model),
            "timeout": settings.timeout_s,
            # We retry ourselves (and count the attempts); the SDK underneath must not.
            "max_retries": 0,
        }
        if settings.temperature is not None:
            kwargs["temperature"] = settings.temperature
        if settings.api_base:
            kwargs["api_base"] = settings.api_base
        if settings.api_key:
            kwargs["api_key"] = settings.api_key
        if settings.max_tokens is not None:
            kwargs["max_tokens"] = settings.max_tokens
        extra = dict(settings.extra)
        headers = dict(extra.pop("extra_headers", None) or {})
        if run_id:
            headers[RUN_ID_HEADER] = run_id
        if headers:
            kwargs["extra_headers"] = headers
        kwargs.update(extra)
        return kwargs


def _short(exc: BaseException, limit: int = 500) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _excerpt(text: str, limit: int) -> str:
    """The start of ``text``, saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit} more characters not repeated]"
