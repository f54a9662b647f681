"""The engine end to end on Chinook, with the gold LLM served over HTTP (no API key anywhere)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from nl2sql_assets.config import ConfigError, LLMConfig, ModelSettings, ProjectConfig
from nl2sql_assets.datasources.base import QueryFailed, QueryOutput
from nl2sql_assets.datasources.registry import DatasourceRegistry
from nl2sql_assets.engine.events import RUN_FINISHED, RUN_STARTED, Event, EventBus
from nl2sql_assets.engine.nodes import schema_text
from nl2sql_assets.engine.pipeline import Engine, RuntimeOptions
from nl2sql_assets.engine.plan import PlanModel
from nl2sql_assets.engine.result import (
    LLM_ERROR,
    PROVIDER_ERROR,
    QUESTION_NOT_ANSWERABLE,
    SECURITY_VIOLATION,
    VALIDATION_ERROR,
)
from nl2sql_assets.engine.validator import GENERIC_REFUSAL
from nl2sql_assets.evaluation.running.gold_llm import FIXED_ANSWER, GoldLLMServer
from nl2sql_assets.evaluation.suites import EvalCase

VIEWER_TABLES = ["Album", "Artist", "Genre", "MediaType", "Playlist", "PlaylistTrack", "Track"]


def config_for(chinook: Path, **extra: Any) -> ProjectConfig:
    return ProjectConfig.model_validate(
        {
            "datasources": [
                {
                    "id": "chinook",
                    "engine": "sqlite",
                    "path": str(chinook),
                    "description": "A music store",
                }
            ],
            "policies": {
                "default_role": "admin",
                "refusal_names_tables": True,  # the demo names refused tables; runs can turn it off
                "roles": {
                    "admin": {"datasources": {"chinook": {"allow": ["*"]}}},
                    "analyst": {"datasources": {"chinook": {"allow": ["*"], "deny": ["Employee"]}}},
                    "viewer": {"datasources": {"chinook": {"allow": VIEWER_TABLES}}},
                },
            },
            **extra,
        }
    )


def case(
    case_id: str, question: str, outcome: dict[str, str], plan: dict | None, rows: list | None = None
) -> EvalCase:
    return EvalCase.model_validate(
        {
            "id": case_id,
            "question": question,
            "datasources": ["chinook"],
            "status": "approved",
            "outcome": outcome,
            "sql": "-- gold sql" if plan is not None else None,
            # an approved answer case a role may answer carries its rows; these tests read no verdict
            "rows": rows if rows is not None or plan is None else [],
            "plan": plan,
        }
    )


COUNTRIES_PLAN = {
    "select": [
        {"expr": {"kind": "column", "name": "Country"}, "alias": "country"},
        {"expr": {"kind": "function", "name": "count", "args": [{"kind": "star"}]}, "alias": "customers"},
    ],
    "from": {"name": "Customer"},
    "group_by": [{"kind": "column", "name": "Country"}],
    "order_by": [{"expr": {"kind": "column", "name": "customers"}, "direction": "desc"}],
    "limit": 3,
}
GENRES_PLAN = {
    "select": [{"expr": {"kind": "column", "name": "Name"}, "alias": "genre"}],
    "from": {"name": "Genre"},
    "order_by": [{"expr": {"kind": "column", "name": "Name"}}],
    "limit": 3,
}
BROKEN_PLAN = {  # "Nmae" is not a column of Genre
    "select": [{"expr": {"kind": "column", "name": "Nmae"}, "alias": "genre"}],
    "from": {"name": "Genre"},
    "limit": 3,
}


def as_data(plan: dict) -> dict:
    """A plan as the engine records it (``PlanModel.to_data``)."""
    return PlanModel.model_validate(plan).to_data()


COUNTRIES = case(
    "countries",
    "Which three countries have the most customers?",
    {"admin": "allowed", "analyst": "allowed", "viewer": "refused"},
    COUNTRIES_PLAN,
)
GENRES = case(
    "genres",
    "Name the first three genres alphabetically.",
    {"admin": "allowed", "viewer": "allowed"},
    GENRES_PLAN,
)
WEATHER = case(
    "weather", "Will it rain in Lisbon tomorrow?", {"admin": "unanswerable", "viewer": "unanswerable"}, None
)
BROKEN = case("broken", "Name three genres (broken plan).", {"admin": "allowed"}, BROKEN_PLAN)
CASES = [COUNTRIES, GENRES, WEATHER, BROKEN]


@pytest.fixture
def make_config(chinook_path: Path) -> Callable[..., ProjectConfig]:
    """The test project's config over the Chinook file, with ``extra`` fields."""
    return functools.partial(config_for, chinook_path)


@pytest.fixture
def bus() -> EventBus:
    return EventBus()


@pytest.fixture
def gold(bus: EventBus) -> Iterator[GoldLLMServer]:
    usage = {"prompt_tokens": 800, "completion_tokens": 50, "cached_tokens": 200, "reasoning_tokens": 10}
    with GoldLLMServer(CASES, bus, usage=usage) as server:
        yield server


@pytest.fixture
def engine(gold: GoldLLMServer, bus: EventBus, make_config: Callable[..., ProjectConfig]) -> Iterator[Engine]:
    config = make_config()
    registry = DatasourceRegistry(config)
    yield Engine(
        config, registry=registry, bus=bus, llm=gold.llm_config(), options=RuntimeOptions(plan_cache=False)
    )
    registry.close()


def ask(engine: Engine, c: EvalCase, role: str) -> Any:
    return engine.ask(c.question, role, context={"case_id": c.id})


def test_an_allowed_question_returns_rows_calls_and_timings(engine: Engine, gold: GoldLLMServer) -> None:
    result = ask(engine, COUNTRIES, "analyst")
    assert result.status == "success", result.error_message
    assert result.error_code is None
    assert result.columns == ["country", "customers"]
    assert result.rows == [["USA", 13], ["Canada", 8], ["France", 5]]
    assert result.sql is not None and "Customer" in result.sql
    assert result.plan == as_data(COUNTRIES_PLAN)
    assert result.plans == [as_data(COUNTRIES_PLAN)]
    assert result.datasources == ["chinook"] and result.routing == ["chinook"]
    assert result.answer is not None and result.answer.summary == FIXED_ANSWER
    assert result.source == "generated" and result.retries == 0
    assert [c.node for c in result.calls] == ["resolver", "decomposer", "planner", "synthesizer"]
    for call in result.calls:
        assert call.model == "openai/gold-plans"
        assert call.usage is not None
        assert (call.usage.input_tokens, call.usage.cached_tokens, call.usage.output_tokens) == (800, 200, 50)
        assert call.usage.reasoning_tokens == 10
    assert set(result.timings) == {"resolver", "decomposer", "planner", "validator", "generator", "policy",
                                   "executor", "synthesizer"}  # fmt: skip
    assert all(t >= 0 for t in result.timings.values())
    assert result.usage["planner"].input_tokens == 800
    assert result.retrieval is not None and "Customer" in result.retrieval


def test_a_refusal_is_generic_and_stops_at_once(engine: Engine, gold: GoldLLMServer) -> None:
    viewer = engine.derive(refusal_names_tables=False)
    result = ask(viewer, COUNTRIES, "viewer")
    assert result.status == "error"
    assert result.error_code == SECURITY_VIOLATION
    assert result.error_message == GENERIC_REFUSAL
    assert "Customer" not in (result.error_message or "")
    assert result.rows is None and result.sql is None and result.answer is None
    assert [c.node for c in result.calls] == [
        "resolver",
        "decomposer",
        "planner",
    ]  # no refiner, no synthesizer
    assert gold.requests_by_schema["PlanRepair"] == 0


def test_the_config_can_name_refused_tables(engine: Engine) -> None:
    result = ask(engine, COUNTRIES, "viewer")  # refusal_names_tables from the config: on
    assert result.error_code == SECURITY_VIOLATION
    assert "Customer" in (result.error_message or "")


def test_an_unanswerable_question(engine: Engine) -> None:
    result = ask(engine, WEATHER, "admin")
    assert result.status == "error"
    assert result.error_code == QUESTION_NOT_ANSWERABLE
    assert result.rows is None and result.datasources == []
    assert [c.node for c in result.calls] == ["resolver"]


def test_a_broken_plan_goes_to_the_refiner_then_fails(engine: Engine, gold: GoldLLMServer) -> None:
    result = ask(engine, BROKEN, "admin")
    assert result.status == "error"
    assert result.error_code == VALIDATION_ERROR
    assert "Nmae" in (result.error_message or "")
    assert result.retries == 1  # the refiner kept the plan; it failed again, so the run gave up
    assert [c.node for c in result.calls] == ["resolver", "decomposer", "planner", "refiner"]
    assert result.plans == [as_data(BROKEN_PLAN)] * 2
    assert result.rows is None
    assert "refiner" in result.timings


def test_a_repaired_plan_runs(bus: EventBus, make_config: Callable[..., ProjectConfig]) -> None:
    answers = {
        "PlanRepair": lambda c, role, srv: {"keep_same_plan": False, "plan": GENRES_PLAN, "reason": "typo"}
    }
    config = make_config()
    with GoldLLMServer([BROKEN], bus, answers=answers) as gold:
        engine = Engine(config, bus=bus, llm=gold.llm_config())
        result = ask(engine, BROKEN, "admin")
    assert result.status == "success", result.error_message
    assert result.rows == [["Alternative"], ["Alternative & Punk"], ["Blues"]]
    assert result.retries == 1
    assert result.plans == [BROKEN_PLAN, as_data(GENRES_PLAN)]
    assert result.plan == as_data(GENRES_PLAN)
    # Why the first plan failed is kept beside it; the second stood.
    [why] = result.plan_errors
    assert why.startswith(VALIDATION_ERROR) and "Nmae" in why
    assert result.answer is not None and result.answer.content

    # The case record keeps every plan tried with its error, and the full answer.
    from nl2sql_assets.evaluation.running.modes import get_mode
    from nl2sql_assets.evaluation.running.runner import build_case_record
    from nl2sql_assets.evaluation.running.selection import RoleRun

    record = build_case_record(rr=RoleRun("s", BROKEN, "admin"), config_name="c", mode=get_mode("plans"),
                               pass_index=1, result=result, scores={}, latency_s=0.1, models={}, cost_usd=0.0,
                               unknown_cost_calls=0)
    assert [(t.plan, t.error) for t in record.plans_tried] == [(BROKEN_PLAN, why), (as_data(GENRES_PLAN), None)]
    assert record.answer == result.answer.summary and record.answer_content == result.answer.content


def test_the_retry_budget_bounds_repairs(bus: EventBus, make_config: Callable[..., ProjectConfig]) -> None:
    """A refiner that keeps proposing broken plans is cut off after settings.retry_budget repairs."""
    answers = {"PlanRepair": lambda c, role, srv: {"keep_same_plan": False, "plan": BROKEN_PLAN}}
    config = make_config(settings={"retry_budget": 2})
    with GoldLLMServer([BROKEN], bus, answers=answers) as gold:
        result = ask(Engine(config, bus=bus, llm=gold.llm_config()), BROKEN, "admin")
        assert gold.requests_by_schema["PlanRepair"] == 2
    assert result.error_code == VALIDATION_ERROR
    assert result.retries == 2
    assert len(result.plans) == 3


class FlakyAdapter:
    """The Chinook adapter, failing its first statement (an execution error the plan did not cause)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.id, self.engine, self.dialect = inner.id, inner.engine, inner.dialect
        self.row_limit, self.timeout_s = inner.row_limit, inner.timeout_s
        self.executed = 0

    def execute(
        self, sql: str, *, row_limit: int | None = None, timeout_s: float | None = None
    ) -> QueryOutput:
        self.executed += 1
        if self.executed == 1:
            raise QueryFailed("database is locked")
        return self.inner.execute(sql, row_limit=row_limit, timeout_s=timeout_s)

    def introspect(self) -> Any:
        return self.inner.introspect()

    def close(self) -> None:
        self.inner.close()


def test_an_execution_error_is_refined_and_re_executed(gold: GoldLLMServer, bus: EventBus,
                                                       make_config: Callable[..., ProjectConfig]) -> None:
    config = make_config()
    flaky = FlakyAdapter(DatasourceRegistry(config).get("chinook"))
    engine = Engine(config, registry=DatasourceRegistry.from_adapters({"chinook": flaky}), bus=bus,
                    llm=gold.llm_config())  # fmt: skip
    result = ask(engine, GENRES, "viewer")
    assert result.status == "success", result.error_message
    assert flaky.executed == 2
    assert result.retries == 1
    assert [c.node for c in result.calls] == ["resolver", "decomposer", "planner", "refiner", "synthesizer"]


def test_an_unreachable_provider_is_a_provider_error(bus: EventBus, make_config: Callable[..., ProjectConfig]) -> None:
    # Nothing listens on this port: the connection is refused, and no retry is configured.
    dead = LLMConfig(
        default=ModelSettings(
            model="openai/gold-plans",
            api_base="http://127.0.0.1:9/v1",
            api_key="x",
            timeout_s=2,
            max_retries=0,
        )
    )
    result = Engine(make_config(), bus=bus, llm=dead).ask(GENRES.question, "admin")
    assert result.status == "error"
    # The way to the provider failed, not the model: an environment error, never LLM_ERROR.
    assert result.error_code == PROVIDER_ERROR != LLM_ERROR
    assert len(result.calls) == 1 and result.calls[0].node == "resolver"
    call = result.calls[0]
    assert call.error and call.error_kind == "transport"
    # A dropped request may have been billed: its prompt is counted, flagged as estimated.
    assert call.token_source == "estimated" and call.usage is not None and call.usage.output_tokens == 0


def test_events_frame_each_run(engine: Engine, bus: EventBus) -> None:
    seen: list[Event] = []
    bus.subscribe("*", seen.append)
    result = engine.ask(GENRES.question, "viewer", run_id="fixed-run-id", context={"case_id": "genres"})
    assert result.run_id == "fixed-run-id"
    topics = [(e.topic, e.run_id) for e in seen]
    assert topics == [(RUN_STARTED, "fixed-run-id"), (RUN_FINISHED, "fixed-run-id")]
    assert seen[0].payload == {
        "question": GENRES.question,
        "role": "viewer",
        "context": {"case_id": "genres"},
    }
    assert seen[1].payload["status"] == "success" and seen[1].payload["error_code"] is None
    refused = ask(engine, COUNTRIES, "viewer")
    assert seen[-1].run_id == refused.run_id and seen[-1].payload["error_code"] == SECURITY_VIOLATION
    assert len(refused.run_id) == 32  # a fresh uuid4 hex


def test_many_questions_at_once_get_their_own_answers(engine: Engine, gold: GoldLLMServer) -> None:
    jobs = [(COUNTRIES, "admin"), (GENRES, "viewer"), (WEATHER, "admin"), (COUNTRIES, "viewer")] * 2

    async def go() -> list[Any]:
        return await asyncio.gather(
            *(engine.aask(c.question, role, context={"case_id": c.id}) for c, role in jobs)
        )

    results = asyncio.run(go())
    for (c, role), result in zip(jobs, results, strict=True):
        expected = c.outcome[role]
        if expected == "allowed":
            assert result.status == "success", (c.id, role, result.error_message)
            assert result.plan == c.plan.to_data()
        elif expected == "refused":
            assert result.error_code == SECURITY_VIOLATION
        else:
            assert result.error_code == QUESTION_NOT_ANSWERABLE
    assert len({r.run_id for r in results}) == len(jobs)


def test_unknown_role_is_a_clear_error(engine: Engine) -> None:
    with pytest.raises(ConfigError, match="unknown role 'guest'"):
        engine.ask(GENRES.question, "guest")


def test_the_default_role_is_used_when_none_is_given(engine: Engine) -> None:
    result = engine.ask(COUNTRIES.question, context={"case_id": "countries"})
    assert result.role == "admin" and result.status == "success"


def test_derive_leaves_the_serving_engine_alone(engine: Engine, gold: GoldLLMServer) -> None:
    other_llm = LLMConfig(default=ModelSettings(model="openai/other", api_base=gold.base_url))
    derived = engine.derive(llm=other_llm, curated=False, refusal_names_tables=False)
    assert derived.registry is engine.registry and derived.bus is engine.bus
    assert derived.llm is other_llm and engine.llm is not other_llm
    assert derived.options.curated is False and engine.options.curated is True
    assert derived.options.plan_cache is False  # inherited from the engine it was derived from
    assert engine.refusal_names_tables is True and derived.refusal_names_tables is False


def test_the_plan_cache_replays_a_working_plan(gold: GoldLLMServer, bus: EventBus,
                                               make_config: Callable[..., ProjectConfig]) -> None:
    config = make_config()
    engine = Engine(config, bus=bus, llm=gold.llm_config())  # plan cache on by default
    first = ask(engine, GENRES, "viewer")
    second = ask(engine, GENRES, "viewer")
    assert first.rows == second.rows
    assert [c.node for c in second.calls] == ["resolver", "synthesizer"]
    assert gold.requests_by_schema["PlanModel"] == 1
    # Another role is another key; a runtime without the cache asks the planner again.
    ask(engine, GENRES, "admin")
    ask(engine.derive(plan_cache=False), GENRES, "viewer")
    assert gold.requests_by_schema["PlanModel"] == 3


def test_curated_answers_are_matched_exactly(gold: GoldLLMServer, bus: EventBus,
                                             make_config: Callable[..., ProjectConfig]) -> None:
    curated = [{"question": COUNTRIES.question, "datasource": "chinook",
                "sql": "SELECT Country AS country, COUNT(*) AS customers FROM Customer "
                       "GROUP BY Country ORDER BY customers DESC LIMIT 2"}]  # fmt: skip
    engine = Engine(make_config(curated=curated), bus=bus, llm=gold.llm_config())
    hit = engine.ask(
        "  which THREE countries have the most customers ", "admin", context={"case_id": "countries"}
    )
    assert hit.source == "verified"
    assert hit.rows == [["USA", 13], ["Canada", 8]]
    assert [c.node for c in hit.calls] == ["synthesizer"]
    # Off for a runtime that measures the generated path.
    generated = engine.derive(curated=False).ask(
        COUNTRIES.question, "admin", context={"case_id": "countries"}
    )
    assert generated.source == "generated" and len(generated.rows or []) == 3
    # A role that may not read the curated SQL's tables takes the generated path (and is refused there).
    viewer = engine.ask(COUNTRIES.question, "viewer", context={"case_id": "countries"})
    assert viewer.source == "generated" and viewer.error_code == SECURITY_VIOLATION


def test_ask_works_inside_a_running_event_loop(engine: Engine) -> None:
    async def inside() -> Any:
        return engine.ask(GENRES.question, "viewer", context={"case_id": "genres"})

    result = asyncio.run(inside())
    assert result.status == "success"


def test_a_retriever_narrows_the_schema_only_above_the_table_limit(
    gold: GoldLLMServer, bus: EventBus, make_config: Callable[..., ProjectConfig]
) -> None:
    asked: list[str] = []

    def retriever(question: str, snapshot: Any) -> dict[str, list[str]]:
        asked.append(question)
        return {"Genre": ["GenreId", "Name"]}

    engine = Engine(make_config(), bus=bus, llm=gold.llm_config(), retriever=retriever)
    whole = ask(engine, GENRES, "viewer")  # Chinook's 11 tables are under the default limit of 15
    assert asked == [] and whole.retrieval is not None and len(whole.retrieval) == 11
    narrowed = ask(engine.derive(full_snapshot_max_tables=0, plan_cache=False), GENRES, "viewer")
    assert asked == [GENRES.question]
    assert narrowed.retrieval == {"Genre": ["GenreId", "Name"]}
    assert "retriever" in narrowed.timings and narrowed.status == "success"


def test_schema_text_lists_keys_and_honours_a_selection(make_config: Callable[..., ProjectConfig]) -> None:
    snapshot = DatasourceRegistry(make_config()).snapshot("chinook")
    text = schema_text(snapshot)
    assert "table Album (primary key: AlbumId)" in text
    assert "  ArtistId INTEGER not null -> Artist.ArtistId" in text
    narrowed = schema_text(snapshot, {"genre": ["name"]})
    assert narrowed.splitlines() == ["table Genre (primary key: GenreId)", "  Name NVARCHAR(120)"]
