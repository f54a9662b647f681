"""The LLM client against hostile endpoints: a deadline per attempt, a size cap read while the
body streams in, a short parse-retry excerpt, and no echoed key in anything it returns."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from nl2sql_assets.config import ModelSettings
from nl2sql_assets.llm.client import RETRY_EXCERPT_CHARS, LLMCallError, LLMClient, _lib
from tests.hostile_llm import HostileServer

KEY = "gw-Zq93hV81mXw0PLuA7tR2x"  # shaped like no provider key: only the configured value can catch it


class Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")
    total: int
    label: str


def _client(server: HostileServer, **settings: Any) -> LLMClient:
    base = {"model": "openai/hostile", "api_base": server.base_url, "api_key": KEY, "timeout_s": 5,
            "max_retries": 0, **settings}
    return LLMClient(lambda node: ModelSettings(**base))


def _ask(client: LLMClient) -> Any:
    return asyncio.run(client.structured("planner", [{"role": "user", "content": "How many?"}], Answer))


@pytest.fixture(scope="module", autouse=True)
def _litellm_loaded() -> None:
    _lib()  # import litellm before anything is timed


@pytest.mark.parametrize(("retries", "attempts"), [(0, 1), (1, 2)])
def test_timeout_s_is_a_deadline_for_the_whole_attempt_body_included(retries: int, attempts: int) -> None:
    with HostileServer("trickle") as server:  # headers at once, then one byte a second
        started = time.monotonic()
        with pytest.raises(LLMCallError) as info:
            _ask(_client(server, timeout_s=2, max_retries=retries))
        elapsed = time.monotonic() - started
    # Each attempt ends at its deadline (plus a little slack), where it used to run for minutes.
    assert elapsed < attempts * 2 + (attempts - 1) * 0.5 + 1.0, elapsed
    assert info.value.call.attempts == attempts
    assert "within the 2 s deadline" in str(info.value)


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_60_mb_answer_is_an_error_and_memory_stays_low(chunked: bool) -> None:
    child = """
import asyncio, json, sys
from pydantic import BaseModel
from nl2sql_assets.config import ModelSettings
from nl2sql_assets.llm.client import LLMCallError, LLMClient, _lib
class Answer(BaseModel):
    total: int
    label: str
def peak_mib():  # this process's own peak RSS (ru_maxrss would count the parent's memory at fork)
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024
_lib()
before = peak_mib()
client = LLMClient(lambda node: ModelSettings(model="openai/hostile", api_base=sys.argv[1], api_key="k" * 12,
                                              timeout_s=30, max_retries=2))
try:
    asyncio.run(client.structured("planner", [{"role": "user", "content": "q"}], Answer))
    error = None
except LLMCallError as exc:
    error = str(exc)
print(json.dumps({"error": error, "rss_mib_before": before, "rss_mib": peak_mib()}))
"""
    with HostileServer("huge", chunked=chunked) as server:
        done = subprocess.run([sys.executable, "-c", child, server.base_url], capture_output=True, text=True,
                              timeout=300)
        requests = len(server.requests)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["error"] is not None and "2000000-byte cap" in out["error"]
    assert out["rss_mib"] < 400, out
    assert requests == 1  # a cap violation is not retried


def test_the_size_cap_is_configurable() -> None:
    with HostileServer("huge", size=5000) as server, pytest.raises(LLMCallError, match="4000-byte cap"):
        _ask(_client(server, max_response_bytes=4000))
    ok = ModelSettings(model="m")
    assert ok.max_response_bytes == 2_000_000


def test_a_parse_retry_sends_back_only_a_short_excerpt() -> None:
    with HostileServer("bad", size=100_000) as server:
        with pytest.raises(LLMCallError, match="unparsable Answer"):
            _ask(_client(server, max_retries=1))
        assert len(server.requests) == 2
        first, second = (json.dumps(body) for _, body in server.requests)
    messages = server.requests[1][1]["messages"]
    assistant = [m for m in messages if m["role"] == "assistant"]
    assert len(assistant) == 1 and len(assistant[0]["content"]) <= RETRY_EXCERPT_CHARS + 60
    assert assistant[0]["content"].startswith("not json xxx") and "more characters not repeated" in assistant[0]["content"]
    assert len(second) - len(first) < 2000  # the retry adds an excerpt and a short note, not the answer


def test_an_echoed_key_is_redacted_at_the_source() -> None:
    with HostileServer("echo") as server:
        with pytest.raises(LLMCallError) as info:
            _ask(_client(server))
        sent = server.requests[0][0]
    assert {k.lower(): v for k, v in sent.items()}["authorization"] == f"Bearer {KEY}"  # it was sent and echoed
    for text in (str(info.value), info.value.call.error or "", info.value.call.model_dump_json()):
        assert KEY not in text
    assert "[REDACTED]" in str(info.value)
