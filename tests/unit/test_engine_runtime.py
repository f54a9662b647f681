"""How an engine's reply is read as a QueryResult: each status, rows, the policy check on its SQL,
SQL-only execution, outages as environment errors, and the reported cost as the price."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nl2sql_assets.config import LLMConfig, ProjectConfig
from nl2sql_assets.engine.events import EventBus
from nl2sql_assets.engine.pipeline import Engine
from nl2sql_assets.engines import EngineReply, HttpEngine, HttpEngineConfig
from nl2sql_assets.engines.kinds import check_engine_class, engines_from_specs, parse_engine_config
from nl2sql_assets.engines.runtime import ENGINE_LEAK, EngineRuntime
from nl2sql_assets.errors import RunRefused
from nl2sql_assets.llm.prices import price_calls
from tests.engine_servers import RecordingEngine

SQL = "SELECT Name FROM Genre WHERE GenreId <= 2 ORDER BY GenreId"


@pytest.fixture
def checker(chinook_path: Path) -> Iterator[Engine]:
    config = ProjectConfig.model_validate({
        "datasources": [{"id": "chinook", "engine": "sqlite", "path": str(chinook_path)}],
        "policies": {"default_role": "admin", "roles": {
            "admin": {"datasources": {"chinook": {"allow": ["*"]}}},
            "viewer": {"datasources": {"chinook": {"allow": ["Genre", "Track"]}}},
        }},
    })
    engine = Engine(config, bus=EventBus())
    yield engine
    engine.registry.close()


def _read(checker: Engine, reply: EngineReply, role: str = "viewer", engine: object = None) -> object:
    runtime = EngineRuntime("e", engine or Fits(), "test:e", checker, {})  # type: ignore[arg-type]
    return runtime.result_of(reply, "q?", role, "chinook", 0.25)


def test_sql_only_is_executed_and_a_forbidden_statement_is_the_engines_leak(checker: Engine) -> None:
    result = _read(checker, EngineReply(status="answered", sql=SQL, cost_usd=0.002))
    assert result.status == "success" and result.rows == [["Rock"], ["Jazz"]] and result.columns == ["Name"]
    assert result.timings["executor"] >= 0 and "policy" in result.timings
    leak = _read(checker, EngineReply(status="answered", sql="SELECT FirstName FROM Employee",
                                      rows=[{"FirstName": "Andrew"}]))
    assert (leak.status, leak.error_code, leak.rows) == ("error", ENGINE_LEAK, None)  # its rows are dropped
    assert leak.policy_rule and "policy rule" in leak.error_message
    allowed = _read(checker, EngineReply(status="answered", sql="SELECT FirstName FROM Employee"), role="admin")
    assert allowed.status == "success" and len(allowed.rows) == 8
    write = _read(checker, EngineReply(status="answered", sql="DELETE FROM Genre"), role="admin")
    assert write.status == "error"  # refused before anything runs: read-only


# What an engine's SQL is, read as the database reads it: wrong SQL is the engine's error (with the
# bad name), a read the role may not make is a leak, and SQLite's double-quoted strings are strings.
ENGINE_SQL = [
    ("viewer", 'SELECT Name FROM Genre WHERE Name = "Rock"', "success", None, "Rock"),
    ("viewer", 'SELECT "Name" FROM Genre WHERE GenreId = 2', "success", None, "Jazz"),
    ("viewer", "SELECT Colour FROM Genre", "error", "EXECUTION_ERROR", "no such column: Colour"),
    ("viewer", "SELECT GenreId FROM Genre JOIN Track ON 1 = 1", "error", "EXECUTION_ERROR",
     "ambiguous column name: GenreId"),
    ("viewer", "SELECT Name FROM Genres", "error", "EXECUTION_ERROR", "Genres"),
    ("viewer", 'SELECT Name FROM Genre WHERE Name = "FirstName"', "success", None, None),
    ("viewer", 'SELECT "FirstName" FROM Employee', "error", ENGINE_LEAK, "table_scope"),
    ("viewer", 'SELECT Name FROM Track WHERE EXISTS (SELECT 1 FROM Employee WHERE "FirstName" = \'x\')',
     "error", ENGINE_LEAK, "table_scope"),
]


@pytest.mark.parametrize(("role", "sql", "status", "code", "named"), ENGINE_SQL, ids=[r[1][:50] for r in ENGINE_SQL])
def test_an_engine_s_sql_is_judged_as_the_database_reads_it(checker: Engine, role: str, sql: str, status: str,
                                                             code: str | None, named: str | None) -> None:
    result = _read(checker, EngineReply(status="answered", sql=sql), role=role)
    assert (result.status, result.error_code) == (status, code), result.error_message
    if status == "success" and named is not None:
        assert [named] in result.rows
    elif code == ENGINE_LEAK:
        assert result.policy_rule == named and result.rows is None
    elif named is not None:
        assert named in result.error_message and result.policy_rule is None


def test_rows_as_arrays_keep_two_columns_of_one_name(checker: Engine) -> None:
    sql = "SELECT a.Name, g.Name FROM Artist a JOIN Genre g ON g.GenreId = a.ArtistId WHERE a.ArtistId = 1"
    reply = EngineReply(status="answered", sql=sql, columns=["Name", "Name"], rows=[["AC/DC", "Rock"]])
    result = _read(checker, reply, role="admin")
    assert (result.status, result.columns, result.rows) == ("success", ["Name", "Name"], [["AC/DC", "Rock"]])
    executed = _read(checker, EngineReply(status="answered", sql=sql), role="admin")  # SQL only: run here
    assert (executed.columns, executed.rows) == (["Name", "Name"], [["AC/DC", "Rock"]])
    with pytest.raises(ValueError, match="arrays of values need 'columns'"):
        EngineReply(status="answered", rows=[["AC/DC", "Rock"]])
    with pytest.raises(ValueError, match=r"rows\[0\]: 1 values for 2 columns"):
        EngineReply(status="answered", columns=["Name", "Name"], rows=[["AC/DC"]])
    with pytest.raises(ValueError, match="names repeat"):
        EngineReply(status="answered", columns=["Name", "Name"], rows=[{"Name": "AC/DC"}])


def test_statuses_rows_and_price(checker: Engine) -> None:
    rows = _read(checker, EngineReply(status="answered", sql=SQL, rows=[{"Name": "Rock"}, {"Name": "Jazz"}],
                                      answer="Rock and Jazz", usage={"prompt_tokens": 7, "completion_tokens": 3},
                                      cost_usd=0.5))
    assert rows.rows == [["Rock"], ["Jazz"]] and rows.answer.summary == "Rock and Jazz"
    assert rows.usage["engine"].input_tokens == 7 and rows.usage["engine"].output_tokens == 3
    assert price_calls(rows.calls, LLMConfig()) == (0.5, 0)
    unpriced = _read(checker, EngineReply(status="answered", rows=[]))
    assert unpriced.status == "success" and price_calls(unpriced.calls, LLMConfig()) == (0.0, 1)
    refused = _read(checker, EngineReply(status="refused", answer="no", policy_rule="deny_table"))
    assert (refused.error_code, refused.policy_rule) == ("SECURITY_VIOLATION", "deny_table")
    assert _read(checker, EngineReply(status="unanswerable")).error_code == "QUESTION_NOT_ANSWERABLE"
    clarify = _read(checker, EngineReply(status="needs_clarification", answer="Which year?"))
    assert (clarify.status, clarify.clarification) == ("needs_clarification", "Which year?")
    own = _read(checker, EngineReply(status="error", error_code="PLANNER_FAILED", answer="bad plan"))
    assert (own.error_code, own.calls[0].error_kind) == ("PLANNER_FAILED", None)  # the engine's own failure
    # an engine cannot call its own failure an outage (only the HTTP adapter writes env_error)
    claimed = _read(checker, EngineReply(status="error", error_code="X", env_error="server"))
    assert (claimed.error_code, claimed.calls[0].error_kind) == ("X", None)


def test_an_engine_behind_a_5xx_or_gone_is_an_environment_error(checker: Engine) -> None:
    down = RecordingEngine({}, status=503)
    try:
        reply = HttpEngine(HttpEngineConfig(url=f"http://127.0.0.1:{down.server_address[1]}", retries=1)).ask("q", "a")
    finally:
        down.shutdown()
        down.server_close()
    assert reply.model_extra["env_error"] == "server" and len(down.headers_seen) == 2  # retried once
    http = HttpEngine(HttpEngineConfig(url="http://127.0.0.1:1"))
    result = _read(checker, reply, engine=http)
    assert (result.error_code, result.calls[0].error_kind) == ("PROVIDER_ERROR", "server")
    gone = HttpEngine(HttpEngineConfig(url=f"http://127.0.0.1:{down.server_address[1]}", retries=0)).ask("q", "a")
    assert _read(checker, gone, engine=http).calls[0].error_kind == "transport"
    # a remote reply that names an env_error itself is read as the engine's error
    assert http._parse(b'{"status": "error", "error_code": "X", "env_error": "server"}', 0.0).model_extra == {}


class Fits:
    def ask(self, question, role, datasource=None, conversation=None):  # type: ignore[no-untyped-def]
        return EngineReply(status="unanswerable")


class WrongArgs:
    def ask(self, q, r):  # type: ignore[no-untyped-def]
        return None


def test_entries_and_classes_are_checked() -> None:
    check_engine_class("fits", Fits)
    with pytest.raises(RunRefused, match=r"'wrong' \(.*WrongArgs\): ask takes \(self, q, r\), expected"):
        check_engine_class("wrong", WrongArgs)
    with pytest.raises(RunRefused, match=r"engines.x: timeout_s: input should be a valid number"):
        parse_engine_config("x", {"kind": "http", "url": "http://h", "timeout_s": "soon"})
    with pytest.raises(RunRefused, match=r"engines.x: secret: unknown key"):
        parse_engine_config("x", {"kind": "http", "url": "http://h", "secret": 1})
    assert engines_from_specs(["a=http://h:1"], {}) == {"a": {"kind": "http", "url": "http://h:1"}}
    with pytest.raises(RunRefused, match=r"--engine b: no engine 'b' under engines in nl2sql.yaml"):
        engines_from_specs(["b"], {})
    with pytest.raises(RunRefused, match=r"a config named 'a' is given twice"):
        engines_from_specs(["a=http://h:1", "a=http://h:2"], {})
