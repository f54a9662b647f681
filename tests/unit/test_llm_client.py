"""The LLM client against a scripted OpenAI-compatible server on 127.0.0.1 (litellm over real HTTP)."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from nl2sql_assets.config import ModelSettings
from nl2sql_assets.llm.calls import Usage
from nl2sql_assets.llm.client import (
    RUN_ID_HEADER,
    LLMCallError,
    LLMClient,
    backoff_delay,
    usage_from_response,
)


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    total: int
    label: str


def completion(content: str, usage: dict[str, Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1,
        "model": "test-model-2026-01-01",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
    }
    if usage is not None:
        body["usage"] = usage
    return body


@dataclass
class Step:
    status: int = 200
    body: dict[str, Any] = field(default_factory=dict)
    delay_s: float = 0.0


GOOD_USAGE = {
    "prompt_tokens": 1000,
    "completion_tokens": 300,
    "total_tokens": 1300,
    "prompt_tokens_details": {"cached_tokens": 400},
    "completion_tokens_details": {"reasoning_tokens": 120},
}
GOOD = Step(200, completion('{"total": 42, "label": "customers"}', GOOD_USAGE))


class ScriptedServer:
    """Replies with the scripted steps in order (the last one repeats); records every request."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = steps
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((dict(self.headers), body))
                step = outer.steps[min(len(outer.requests), len(outer.steps)) - 1]
                if step.delay_s:
                    time.sleep(step.delay_s)
                data = json.dumps(step.body).encode()
                try:
                    self.send_response(step.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (timeout test)
                    pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[ScriptedServer] = []

    def make(*steps: Step) -> ScriptedServer:
        s = ScriptedServer(list(steps))
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.close()


def client_for(server: ScriptedServer, **settings: Any) -> LLMClient:
    base = {"model": "openai/test-model", "api_base": server.base_url, "api_key": "test", "timeout_s": 5}
    base.update(settings)
    return LLMClient(lambda node: ModelSettings(**base))


def ask(client: LLMClient, run_id: str | None = "run-1") -> tuple[Any, Any]:
    return asyncio.run(
        client.structured("planner", [{"role": "user", "content": "How many?"}], Answer, run_id=run_id)
    )


def test_structured_output_is_parsed_and_usage_recorded(serve: Any) -> None:
    server = serve(GOOD)
    parsed, call = ask(client_for(server, max_retries=0))
    assert parsed == Answer(total=42, label="customers")
    assert call.node == "planner"
    assert call.model == "openai/test-model"  # the configured model, not the response's snapshot name
    assert call.attempts == 1 and call.error is None
    assert call.usage == Usage(
        input_tokens=1000, cached_tokens=400, cache_write_tokens=0, output_tokens=300, reasoning_tokens=120
    )
    assert call.latency_ms > 0


def test_request_carries_schema_run_id_and_settings(serve: Any) -> None:
    server = serve(GOOD)
    ask(client_for(server, max_retries=0, temperature=0.0, max_tokens=77), run_id="abc123")
    headers, body = server.requests[0]
    assert {k.lower(): v for k, v in headers.items()}[RUN_ID_HEADER.lower()] == "abc123"
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "Answer"
    assert set(fmt["json_schema"]["schema"]["properties"]) == {"total", "label"}
    assert body["temperature"] == 0.0
    assert body["max_tokens"] == 77


def test_temperature_none_is_not_sent(serve: Any) -> None:
    server = serve(GOOD)
    ask(client_for(server, max_retries=0, temperature=None))
    assert "temperature" not in server.requests[0][1]


def test_a_500_is_retried_and_then_succeeds(serve: Any) -> None:
    server = serve(Step(500, {"error": {"message": "boom", "type": "server_error"}}), GOOD)
    parsed, call = ask(client_for(server, max_retries=2))
    assert parsed.total == 42
    assert call.attempts == 2
    assert len(server.requests) == 2  # litellm's SDK did not retry on its own
    # The answer's tokens are kept; the 500's prompt may have been billed, so it is counted
    # with the tokenizer on top: the call is flagged as mixed, never undercounted.
    assert call.usage is not None and call.usage.output_tokens == 300
    assert call.usage.input_tokens > 1000
    assert call.token_source == "mixed"
    assert call.error_kind is None


def test_a_429_then_ok_keeps_the_measured_usage(serve: Any) -> None:
    server = serve(Step(429, {"error": {"message": "slow down", "type": "rate_limit_error"}}), GOOD)
    parsed, call = ask(client_for(server, max_retries=2))
    assert parsed.total == 42 and call.attempts == 2
    # A 429 is refused before any work: the call's tokens are the answer's, as reported.
    assert call.usage == Usage(input_tokens=1000, cached_tokens=400, output_tokens=300, reasoning_tokens=120)
    assert call.token_source == "measured"


@pytest.mark.parametrize(
    ("status", "kind"), [(401, "auth"), (403, "auth"), (402, "quota"), (404, "not_found")]
)
def test_a_refusing_provider_is_an_environment_error(serve: Any, status: int, kind: str) -> None:
    server = serve(Step(status, {"error": {"message": "Insufficient Balance sk-abcdefghijklmnopqrstuvwxyz",
                                           "type": "error"}}))
    with pytest.raises(LLMCallError) as info:
        ask(client_for(server, max_retries=3))
    call = info.value.call
    assert len(server.requests) == 1  # never retried
    assert (call.error_kind, call.status_code) == (kind, status)
    assert call.usage == Usage()  # a refused request is billed nothing, and that is known
    assert f"{kind} error (HTTP {status})" in str(info.value)
    assert "sk-abcdefghijklmnopqrstuvwxyz" not in str(info.value)


def test_a_400_is_not_retried(serve: Any) -> None:
    server = serve(
        Step(400, {"error": {"message": "bad request: no such model", "type": "invalid_request_error"}})
    )
    with pytest.raises(LLMCallError) as info:
        ask(client_for(server, max_retries=3))
    assert len(server.requests) == 1
    assert info.value.call.attempts == 1
    assert info.value.call.usage == Usage()
    # A bad request is about what was asked, not the provider's health.
    assert (info.value.call.error_kind, info.value.call.status_code) == (None, 400)
    assert "no such model" in str(info.value)


def test_retries_are_bounded_by_max_retries(serve: Any) -> None:
    server = serve(Step(503, {"error": {"message": "overloaded", "type": "server_error"}}))
    with pytest.raises(LLMCallError) as info:
        ask(client_for(server, max_retries=1))
    assert len(server.requests) == 2
    assert info.value.call.attempts == 2
    assert info.value.call.error is not None
    assert (info.value.call.error_kind, info.value.call.status_code) == ("server", 503)
    assert info.value.call.token_source == "estimated"  # both prompts may have been billed


def test_the_timeout_is_enforced(serve: Any) -> None:
    server = serve(Step(200, GOOD.body, delay_s=3.0))
    started = time.perf_counter()
    with pytest.raises(LLMCallError) as info:
        ask(client_for(server, max_retries=0, timeout_s=0.5))
    elapsed = time.perf_counter() - started
    assert elapsed < 2.5
    assert "Timeout" in (info.value.call.error or "")
    assert info.value.call.error_kind == "timeout"


def test_unparsable_output_is_retried_once_with_the_error(serve: Any) -> None:
    bad = Step(200, completion('{"total": "many"}', GOOD_USAGE))
    server = serve(bad, GOOD)
    parsed, call = ask(client_for(server, max_retries=2))
    assert parsed.total == 42
    assert call.attempts == 2
    second = server.requests[1][1]["messages"]
    assert second[-1]["role"] == "user" and "Answer" in second[-1]["content"]
    # Both answers were billed: usage is the sum of the two.
    assert call.usage is not None and call.usage.input_tokens == 2000 and call.usage.cached_tokens == 800


def test_unparsable_output_without_retries_fails(serve: Any) -> None:
    server = serve(Step(200, completion("not json at all", GOOD_USAGE)))
    with pytest.raises(LLMCallError) as info:
        ask(client_for(server, max_retries=0))
    assert len(server.requests) == 1
    assert "unparsable Answer" in str(info.value)
    assert info.value.call.usage is not None and info.value.call.usage.input_tokens == 1000


def test_a_response_without_usage_is_counted_with_the_tokenizer(serve: Any) -> None:
    server = serve(Step(200, completion('{"total": 1, "label": "x"}', None)))
    _, call = ask(client_for(server, max_retries=0))
    assert call.token_source == "estimated"
    assert call.usage is not None
    # The prompt (question and JSON schema) is tens of tokens, the answer a handful.
    assert 20 < call.usage.input_tokens < 400
    assert 3 <= call.usage.output_tokens < 30


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        # OpenAI: cached and reasoning details
        (
            {"prompt_tokens": 50, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": 20},
             "completion_tokens_details": {"reasoning_tokens": 4}},
            Usage(input_tokens=50, cached_tokens=20, output_tokens=10, reasoning_tokens=4),
        ),
        # Anthropic (through litellm): cache read and cache creation
        (
            {"prompt_tokens": 900, "completion_tokens": 60, "cache_read_input_tokens": 500,
             "cache_creation_input_tokens": 300},
            Usage(input_tokens=900, cached_tokens=500, cache_write_tokens=300, output_tokens=60),
        ),
        # Details present but null
        (
            {"prompt_tokens": 7, "completion_tokens": 3, "prompt_tokens_details": None,
             "completion_tokens_details": {"reasoning_tokens": None}},
            Usage(input_tokens=7, output_tokens=3),
        ),
        ({"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}, None),
        (None, None),
    ],
)  # fmt: skip
def test_usage_from_response_fields(usage: dict[str, Any] | None, expected: Usage | None) -> None:
    response: dict[str, Any] = {"choices": []}
    if usage is not None:
        response["usage"] = usage
    assert usage_from_response(response) == expected


def test_backoff_grows_and_is_capped() -> None:
    assert 0.15 <= backoff_delay(1) <= 0.25
    assert 0.3 <= backoff_delay(2) <= 0.5
    assert backoff_delay(30) <= 5.0 * 1.25


def test_a_missing_api_key_is_named_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    from nl2sql_assets.config import ModelSettings
    from nl2sql_assets.llm.client import LLMCallError, LLMClient

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    client = LLMClient(lambda node: ModelSettings(model="openai/gpt-4o", api_key=None, max_retries=2))
    with pytest.raises(LLMCallError, match="planner: no API key for openai/gpt-4o: set OPENAI_API_KEY") as info:
        asyncio.run(client.structured("planner", [{"role": "user", "content": "hi"}], ModelSettings))
    assert info.value.call.attempts == 0 and info.value.call.usage is None


LOOPS_SCRIPT = """
import asyncio, gc
from nl2sql_assets.engine.pipeline import run_sync
from nl2sql_assets.llm.client import _lib, run_on_new_loop

async def call():
    response = await _lib().acompletion(model="openai/gpt-4o-mini", api_key="none",
                                        messages=[{"role": "user", "content": "hi"}], mock_response="ok")
    return response.choices[0].message.content

# The engine's long-lived background loop, then a loop of a run's own (as run_cases and seed make
# one), then the background loop again.
print(run_sync(call()), run_on_new_loop(call()), run_sync(call()))
gc.collect()
"""


def test_moving_between_event_loops_leaves_no_litellm_task_pending() -> None:
    """litellm moves its logging worker to whichever loop calls next and drops the task it leaves
    behind; the worker is flushed and stopped when a loop's work is done, so no task is destroyed
    while pending (the asyncio noise at the end of a test run) and no log is carried over."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", LOOPS_SCRIPT], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "ok", "ok"]
    assert "Task was destroyed but it is pending" not in done.stderr
    assert "event loop changed" not in done.stderr
