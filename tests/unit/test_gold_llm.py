"""The gold LLM server: one answer table keyed by schema name, cases picked by run id."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from nl2sql_assets.engine.events import RUN_FINISHED, RUN_STARTED, Event, EventBus
from nl2sql_assets.engine.nodes import DatasourceSelection, Decomposition, PlanRepair, SynthesizedAnswer
from nl2sql_assets.engine.plan import PlanModel
from nl2sql_assets.evaluation.running.gold_llm import FIXED_ANSWER, GoldLLMServer, rows_sentence
from nl2sql_assets.evaluation.suites import EvalCase
from nl2sql_assets.llm.client import RUN_ID_HEADER, LLMClient

ARTISTS = EvalCase.model_validate(
    {
        "id": "artists",
        "question": "How many artists are there?",
        "datasources": ["chinook"],
        "status": "approved",
        "outcome": {"admin": "allowed", "viewer": "allowed"},
        "sql": "SELECT COUNT(*) AS artists FROM Artist",
        "rows": [{"artists": 275}],
        "plan": {
            "select": [
                {
                    "expr": {"kind": "function", "name": "count", "args": [{"kind": "star"}]},
                    "alias": "artists",
                }
            ],
            "from": {"name": "Artist"},
        },
    }
)
GENRES = EvalCase.model_validate(
    {
        "id": "genres",
        "question": "List the first two genres by name.",
        "datasources": ["chinook"],
        "status": "approved",
        "outcome": {"admin": "allowed"},
        "sql": "SELECT Name FROM Genre ORDER BY Name LIMIT 2",
        "rows": [{"Name": "Alternative"}, {"Name": "Alternative & Punk"}],
        "plan": {
            "select": [{"expr": {"kind": "column", "name": "Name"}}],
            "from": {"name": "Genre"},
            "order_by": [{"expr": {"kind": "column", "name": "Name"}}],
            "limit": 2,
        },
    }
)
WEATHER = EvalCase.model_validate(
    {
        "id": "weather",
        "question": "What will the weather be tomorrow?",
        "datasources": ["chinook"],
        "status": "approved",
        "outcome": {"admin": "unanswerable"},
    }
)


@pytest.fixture
def bus() -> EventBus:
    return EventBus()


@pytest.fixture
def gold(bus: EventBus) -> Iterator[GoldLLMServer]:
    usage = {"prompt_tokens": 500, "completion_tokens": 40, "cached_tokens": 100, "reasoning_tokens": 12}
    with GoldLLMServer([ARTISTS, GENRES, WEATHER], bus, usage=usage) as server:
        yield server


def start(bus: EventBus, run_id: str, case_id: str, role: str = "admin") -> None:
    bus.publish(Event(RUN_STARTED, run_id, {"question": "?", "role": role, "context": {"case_id": case_id}}))


def post(server: GoldLLMServer, schema: str | None, run_id: str | None) -> httpx.Response:
    body: dict[str, Any] = {"model": "gold-plans", "messages": [{"role": "user", "content": "q"}]}
    if schema is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": schema, "schema": {}}}
    headers = {RUN_ID_HEADER: run_id} if run_id else {}
    return httpx.post(f"{server.base_url}/chat/completions", json=body, headers=headers, timeout=5)


def content(resp: httpx.Response) -> str:
    assert resp.status_code == 200, resp.text
    return resp.json()["choices"][0]["message"]["content"]


def test_each_schema_name_gets_its_gold_answer(gold: GoldLLMServer, bus: EventBus) -> None:
    start(bus, "r1", "genres")
    sel = DatasourceSelection.model_validate_json(content(post(gold, "DatasourceSelection", "r1")))
    assert sel.datasources == ["chinook"] and sel.answerable
    dec = Decomposition.model_validate_json(content(post(gold, "Decomposition", "r1")))
    assert len(dec.sub_queries) == 1
    assert dec.sub_queries[0].question == GENRES.question
    assert dec.sub_queries[0].expected_columns == ["Name"]
    plan = PlanModel.model_validate_json(content(post(gold, "PlanModel", "r1")))
    assert plan == GENRES.plan
    repair = PlanRepair.model_validate_json(content(post(gold, "PlanRepair", "r1")))
    assert repair.keep_same_plan and repair.plan is None
    answer = SynthesizedAnswer.model_validate_json(content(post(gold, "SynthesizedAnswer", "r1")))
    assert answer.summary == FIXED_ANSWER
    assert gold.requests == 5
    assert gold.requests_by_schema["PlanModel"] == 1


def test_an_unanswerable_case_gets_no_datasource(gold: GoldLLMServer, bus: EventBus) -> None:
    start(bus, "r2", "weather")
    sel = DatasourceSelection.model_validate_json(content(post(gold, "DatasourceSelection", "r2")))
    assert sel.datasources == [] and sel.answerable is False


def test_responses_are_chat_completions_with_usage(gold: GoldLLMServer, bus: EventBus) -> None:
    start(bus, "r3", "artists")
    data = post(gold, "PlanModel", "r3").json()
    assert data["object"] == "chat.completion"
    assert data["choices"][0]["finish_reason"] == "stop"
    assert data["usage"] == {
        "prompt_tokens": 500,
        "completion_tokens": 40,
        "total_tokens": 540,
        "prompt_tokens_details": {"cached_tokens": 100},
        "completion_tokens_details": {"reasoning_tokens": 12},
    }


@pytest.mark.parametrize(
    ("schema", "run_id", "message"),
    [
        ("MysteryOutput", "r4", "unknown structured output 'MysteryOutput'"),
        (None, "r4", "no response_format"),
        ("PlanModel", "never-started", "unknown run 'never-started'"),
        ("PlanModel", None, "no X-NL2SQL-Run-Id header"),
    ],
)
def test_bad_requests_get_a_400_with_a_clear_message(
    gold: GoldLLMServer, bus: EventBus, schema: str | None, run_id: str | None, message: str
) -> None:
    start(bus, "r4", "artists")
    resp = post(gold, schema, run_id)
    assert resp.status_code == 400
    assert message in resp.json()["error"]["message"]
    assert gold.requests == 0


def test_a_case_without_a_plan_cannot_be_planned(gold: GoldLLMServer, bus: EventBus) -> None:
    start(bus, "r5", "weather")
    resp = post(gold, "PlanModel", "r5")
    assert resp.status_code == 400 and "no gold plan" in resp.json()["error"]["message"]


def test_a_finished_run_is_forgotten(gold: GoldLLMServer, bus: EventBus) -> None:
    start(bus, "r6", "artists")
    assert post(gold, "PlanModel", "r6").status_code == 200
    bus.publish(Event(RUN_FINISHED, "r6", {"status": "success"}))
    assert post(gold, "PlanModel", "r6").status_code == 400


def test_concurrent_runs_get_their_own_cases(gold: GoldLLMServer, bus: EventBus) -> None:
    """Two cases in flight at once through litellm: each run id gets its own plan."""
    client = LLMClient(lambda node: gold.llm_config().for_node(node))
    runs = {f"run-{i}": (ARTISTS if i % 2 else GENRES) for i in range(8)}
    for run_id, case in runs.items():
        start(bus, run_id, case.id)

    async def go() -> list[tuple[str, PlanModel]]:
        async def one(run_id: str) -> tuple[str, PlanModel]:
            plan, call = await client.structured(
                "planner", [{"role": "user", "content": "q"}], PlanModel, run_id=run_id
            )
            assert (
                call.usage is not None
                and call.usage.cached_tokens == 100
                and call.usage.reasoning_tokens == 12
            )
            return run_id, plan

        return await asyncio.gather(*(one(r) for r in runs))

    for run_id, plan in asyncio.run(go()):
        assert plan == runs[run_id].plan, run_id
    assert gold.requests == 8


def test_rows_synthesizer_writes_from_the_gold_rows(bus: EventBus) -> None:
    with GoldLLMServer([ARTISTS, GENRES], bus, synthesizer="rows") as server:
        start(bus, "a", "artists")
        start(bus, "g", "genres")
        a = SynthesizedAnswer.model_validate_json(content(post(server, "SynthesizedAnswer", "a")))
        g = SynthesizedAnswer.model_validate_json(content(post(server, "SynthesizedAnswer", "g")))
    assert "275" in a.summary
    assert "2 rows" in g.summary and "Alternative" in g.summary
    assert rows_sentence(ARTISTS) == a.summary


def test_the_llm_config_points_at_the_server(gold: GoldLLMServer) -> None:
    settings = gold.llm_config().for_node("planner")
    assert settings.model == "openai/gold-plans"
    assert settings.api_base == gold.base_url and gold.base_url.startswith("http://127.0.0.1:")
    assert settings.max_retries == 0 and settings.timeout_s == 10


def test_stop_releases_the_port_and_the_bus(bus: EventBus) -> None:
    server = GoldLLMServer([ARTISTS], bus).start()
    url = server.base_url
    server.stop()
    start(bus, "late", "artists")  # no handler left: nothing to record
    with pytest.raises(httpx.HTTPError):
        httpx.post(f"{url}/chat/completions", json={}, timeout=1)


def test_stopping_the_server_ends_its_thread_and_keep_alive_connections():
    """A long-lived process (a Dagster code server) runs plans mode many times: no thread may pile
    up, and a client still holding a keep-alive connection finds it closed."""
    import http.client
    import threading
    import time

    before = set(threading.enumerate())
    server = GoldLLMServer([], EventBus()).start()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    conn.request("GET", "/v1/models")  # keep-alive: the connection stays open after the answer
    response = conn.getresponse()
    assert response.status == 200 and response.getheader("Connection", "keep-alive").lower() != "close"
    assert response.read()
    assert set(threading.enumerate()) - before, "the server runs on a thread of its own"
    server.stop()
    deadline = time.monotonic() + 3
    while set(threading.enumerate()) - before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not set(threading.enumerate()) - before
    assert conn.sock is not None
    conn.sock.settimeout(2)
    assert conn.sock.recv(1) == b"", "the server closed the kept-alive connection"
    conn.close()


def test_a_subclass_that_blocks_is_answered_on_threads_side_by_side(bus: EventBus) -> None:
    """A subclass's respond may block (a model's latency, a hung provider): requests still
    overlap, and the server keeps answering other requests meanwhile."""
    import threading
    import time

    release = threading.Event()

    class Held(GoldLLMServer):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.in_flight = 0
            self.lock = threading.Lock()

        def respond(self, raw: bytes, run_id: str | None) -> tuple[int, dict[str, Any]]:
            with self.lock:
                self.in_flight += 1
            release.wait(10)
            return super().respond(raw, run_id)

    with Held([ARTISTS], bus) as server:
        start(bus, "r", "artists")
        replies: list[httpx.Response] = []
        threads = [threading.Thread(target=lambda: replies.append(post(server, "SynthesizedAnswer", "r")))
                   for _ in range(4)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 10
        while server.in_flight < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        held = server.in_flight
        models = httpx.get(f"{server.base_url}/models", timeout=5)
        release.set()
        for t in threads:
            t.join()
    assert held == 4, "all four requests were held at once"
    assert models.status_code == 200, "answered while four requests were held"
    assert [r.status_code for r in replies] == [200] * 4 and server.requests == 4


def test_a_run_is_answered_on_its_own_loop_then_on_the_servers_thread_again(bus: EventBus) -> None:
    """Mode plans serves the gold server on the run's event loop (no request or answer crosses
    threads); before and after, the server's own thread answers, over the same port."""
    import threading

    import aiohttp

    answered_on: list[str] = []

    def note(case: EvalCase, role: str | None, server: GoldLLMServer) -> dict[str, Any]:
        answered_on.append(threading.current_thread().name)
        return {"summary": "ok", "content": "ok"}

    body = {"model": "gold-plans", "messages": [{"role": "user", "content": "q"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "SynthesizedAnswer", "schema": {}}}}

    async def run(server: GoldLLMServer) -> list[int]:
        async with server.on_running_loop(), aiohttp.ClientSession() as session:
            statuses = []
            for _ in range(3):  # one keep-alive connection, accepted on this loop
                async with session.post(f"{server.base_url}/chat/completions", json=body,
                                        headers={RUN_ID_HEADER: "r"}) as resp:
                    statuses.append(resp.status)
                    await resp.read()
            return statuses

    with GoldLLMServer([ARTISTS], bus, answers={"SynthesizedAnswer": note}) as server:
        start(bus, "r", "artists")
        content(post(server, "SynthesizedAnswer", "r"))
        assert asyncio.run(run(server)) == [200, 200, 200]
        content(post(server, "SynthesizedAnswer", "r"))
    assert answered_on == ["gold-llm-server", "MainThread", "MainThread", "MainThread", "gold-llm-server"]
