"""The engine contract: the built-in engine in process and behind ``serve``'s HTTP server give the same
replies (the gold LLM over real HTTP underneath), and the HTTP client's guards hold."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from nl2sql_assets.config import ProjectConfig
from nl2sql_assets.engine.events import EventBus
from nl2sql_assets.engine.pipeline import Engine
from nl2sql_assets.engines import BuiltinEngine, EngineReply, EngineServer, HttpEngine, HttpEngineConfig, Turn
from nl2sql_assets.engines.http_client import BAD_REPLY, HTTP_ERROR, TOO_LARGE, UNREACHABLE
from nl2sql_assets.evaluation.running.gold_llm import GoldLLMServer
from nl2sql_assets.evaluation.suites.loader import load_suite
from nl2sql_assets.paths import chinook_suite_path
from tests.processes import start, stop

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = {"allowed": "answered", "refused": "refused", "unanswerable": "unanswerable"}


def _config(chinook: Path) -> ProjectConfig:
    viewer = ["Album", "Artist", "Genre", "MediaType", "Playlist", "PlaylistTrack", "Track"]
    return ProjectConfig.model_validate({
        "datasources": [{"id": "chinook", "engine": "sqlite", "path": str(chinook)}],
        "policies": {"default_role": "admin", "roles": {
            "admin": {"datasources": {"chinook": {"allow": ["*"]}}},
            "analyst": {"row_budget": 1000, "datasources": {"chinook": {"allow": ["*"], "deny": ["Employee"],
                                                                         "forbidden_joins": [["InvoiceLine",
                                                                                              "PlaylistTrack"]]}}},
            "viewer": {"row_budget": 100, "datasources": {"chinook": {"allow": viewer}}},
        }},
    })


@pytest.fixture(scope="module")
def served(chinook_path: Path) -> Iterator[tuple[BuiltinEngine, HttpEngine, list[Any]]]:
    suite = load_suite(chinook_suite_path())
    cases = [c for c in suite.approved if c.kind == "answer" and c.plan is not None][:8]
    cases += [c for c in suite.approved if set(c.outcome.values()) == {"unanswerable"}][:1]
    bus = EventBus()
    with GoldLLMServer(cases, bus) as gold:
        engine = BuiltinEngine(Engine(_config(chinook_path), bus=bus, llm=gold.llm_config()))
        server = EngineServer(engine)
        server.start()
        try:
            yield engine, HttpEngine(HttpEngineConfig(url=server.url, timeout_s=30)), cases
        finally:
            server.shutdown()
            server.server_close()


def test_the_built_in_engine_answers_the_same_over_http_as_in_process(
        served: tuple[BuiltinEngine, HttpEngine, list[Any]]) -> None:
    local, remote, cases = served
    compared = 0
    for case in cases:
        for role, outcome in case.outcome.items():
            if outcome not in EXPECTED:
                continue
            here = local.ask(case.question, role, "chinook", context={"case_id": case.id})
            there = remote.ask(case.question, role, "chinook", context={"case_id": case.id})
            assert there.status == here.status == EXPECTED[outcome], (case.id, role, here)
            assert (there.sql, there.rows, there.answer, there.error_code) == \
                (here.sql, here.rows, here.answer, here.error_code)
            assert there.model_extra["run_id"] != here.model_extra["run_id"]  # extra fields are kept
            assert "http" in there.timings and "http" not in here.timings
            if here.status == "answered":
                gold = [list(r.values()) for r in case.rows] if case.rows is not None else None
                assert gold is None or [list(r.values()) for r in here.rows] == gold or not case.order_matters
                assert here.usage is not None and here.usage.prompt_tokens > 0
            compared += 1
    assert compared >= 10


def test_a_follow_up_reaches_the_engine_the_same_way_over_http(
        served: tuple[BuiltinEngine, HttpEngine, list[Any]]) -> None:
    local, remote, cases = served
    case = next(c for c in cases if c.outcome.get("admin") == "allowed")
    turns = [Turn(question="Which tables are there?", sql="SELECT name FROM sqlite_master", answer="eleven")]
    here = local.ask(case.question, "admin", "chinook", turns, context={"case_id": case.id})
    there = remote.ask(case.question, "admin", "chinook", turns, context={"case_id": case.id})
    assert here.status == there.status == "answered"
    assert (there.sql, there.rows, there.answer) == (here.sql, here.rows, here.answer)


def test_the_server_refuses_a_request_that_breaks_the_contract(
        served: tuple[BuiltinEngine, HttpEngine, list[Any]]) -> None:
    import urllib.error
    import urllib.request

    _, remote, _ = served
    for body, expected in ((b'{"question": "q"}', "role: field required"),
                           (b'{"question": "q", "role": "admin", "extra": 1}', "extra: unknown key")):
        request = urllib.request.Request(remote.url, data=body, headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(request, timeout=10)
        assert exc.value.code == 400
        assert expected in json.loads(exc.value.read())["error"].lower()
    reply = remote.ask("How many artists?", "nobody", "chinook")
    assert (reply.status, reply.error_code) == ("error", HTTP_ERROR)
    assert "unknown role 'nobody'" in (reply.answer or "")


class _Scripted(BaseHTTPRequestHandler):
    """A misbehaving engine server: each request gets the next scripted (status, body)."""

    script: ClassVar[list[tuple[int, bytes]]] = []
    seen: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        type(self).seen.append({"body": json.loads(self.rfile.read(length)), "auth": self.headers.get("Authorization")})
        code, body = type(self).script.pop(0)
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def scripted() -> Iterator[tuple[str, type[_Scripted]]]:
    handler = type("Handler", (_Scripted,), {"script": [], "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_the_http_client_retries_outages_keeps_extra_fields_and_hides_its_secret(
        scripted: tuple[str, type[_Scripted]]) -> None:
    url, handler = scripted
    secret = "Bearer sk-test-0123456789abcdef"
    engine = HttpEngine(HttpEngineConfig(url=url, headers={"Authorization": secret}, retries=2))
    ok = {"status": "answered", "sql": "SELECT 1", "rows": [{"x": 1}], "answer": "one", "error_code": None,
          "usage": {"prompt_tokens": 10, "completion_tokens": 2}, "cost_usd": 0.001, "trace_id": "abc"}
    handler.script[:] = [(503, b"busy"), (429, b"slow down"), (200, json.dumps(ok).encode())]
    reply = engine.ask("q", "admin", "chinook", [Turn(question="earlier", sql="SELECT 0", answer="zero")])
    assert reply.status == "answered" and reply.rows == [{"x": 1}] and reply.cost_usd == 0.001
    assert reply.model_extra == {"trace_id": "abc"}
    assert len(handler.seen) == 3 and handler.seen[0]["auth"] == secret
    assert handler.seen[0]["body"] == {"question": "q", "role": "admin", "datasource": "chinook",
                                       "conversation": [{"question": "earlier", "sql": "SELECT 0", "answer": "zero"}]}
    handler.script[:] = [(500, f"crashed with {secret}".encode())] * 3
    down = engine.ask("q", "admin")
    assert (down.status, down.error_code) == ("error", UNREACHABLE)
    assert "sk-test-0123456789abcdef" not in (down.answer or "") and "after 3 attempts" in (down.answer or "")
    handler.script[:] = [(200, json.dumps({"status": "maybe"}).encode())]
    bad = engine.ask("q", "admin")
    assert (bad.status, bad.error_code) == ("error", BAD_REPLY) and "status" in (bad.answer or "")
    handler.script[:] = [(404, b"no such path")]
    assert engine.ask("q", "admin").error_code == HTTP_ERROR and handler.script == []  # a 4xx is not retried
    small = HttpEngine(HttpEngineConfig(url=url, max_reply_bytes=100))
    handler.script[:] = [(200, json.dumps({**ok, "answer": "x" * 500}).encode())]
    assert small.ask("q", "admin").error_code == TOO_LARGE


def test_the_openapi_file_describes_the_models_the_code_uses() -> None:
    spec = yaml.safe_load((ROOT / "docs" / "engine-api.openapi.yaml").read_text())
    schemas = spec["components"]["schemas"]
    from nl2sql_assets.engines import AskRequest

    assert set(schemas["AskRequest"]["properties"]) == set(AskRequest.model_fields)
    assert set(schemas["EngineReply"]["properties"]) == set(EngineReply.model_fields)
    assert schemas["EngineReply"]["properties"]["status"]["enum"] == \
        ["answered", "refused", "unanswerable", "needs_clarification", "error"]
    assert "/ask" in spec["paths"]


def test_serve_runs_the_reference_server_as_a_separate_process(tmp_path: Path, chinook_path: Path) -> None:
    import subprocess
    import sys
    import urllib.request

    config = tmp_path / "nl2sql.yaml"
    config.write_text(yaml.safe_dump(_config(chinook_path).model_dump(mode="json", exclude={"root", "source"})))
    process = start([sys.executable, "-m", "nl2sql_assets.cli", "--config", str(config), "serve",
                     "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline() if process.stdout else ""
        assert line.startswith("serving the built-in engine at http://127.0.0.1:"), process.stderr.read()
        url = line.split(" at ", 1)[1].split("/ask", 1)[0]
        with urllib.request.urlopen(f"{url}/health", timeout=10) as response:
            assert json.loads(response.read()) == {"status": "ok"}
        reply = HttpEngine(HttpEngineConfig(url=url, retries=0)).ask("How many artists?", "nobody", "chinook")
        assert (reply.status, reply.error_code) == ("error", HTTP_ERROR)
        assert "unknown role 'nobody'" in (reply.answer or "")
    finally:
        assert stop(process) == -15  # SIGTERM stops the server: it was not left ignoring it
