"""The eval runner: modes plans and full on a small Chinook suite of our own, with the gold LLM."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from nl2sql_assets.config import (
    DatasourceAccess,
    DatasourceConfig,
    EvalsConfig,
    PoliciesConfig,
    ProjectConfig,
    RolePolicy,
)
from nl2sql_assets.evaluation.suites import EvalCase, EvalSuite, write_suite

VIEWER_TABLES = ["Album", "Artist", "Genre", "MediaType", "Playlist", "PlaylistTrack", "Track"]


def demo_policies() -> PoliciesConfig:
    """The demo's Chinook policy: admin reads all; analyst all but Employee; viewer the catalogue."""
    return PoliciesConfig(
        default_role="admin",
        roles={
            "admin": RolePolicy(datasources={"chinook": DatasourceAccess(allow=["*"])}),
            "analyst": RolePolicy(datasources={"chinook": DatasourceAccess(allow=["*"], deny=["Employee"])}),
            "viewer": RolePolicy(datasources={"chinook": DatasourceAccess(allow=list(VIEWER_TABLES))}),
        },
    )


def _rows(chinook: Path, sql: str) -> list[dict[str, Any]]:
    with sqlite3.connect(f"file:{chinook}?mode=ro", uri=True) as con:
        cur = con.execute(sql)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _col(name: str, table: str | None = None) -> dict[str, Any]:
    return {"kind": "column", "name": name, **({"table": table} if table else {})}


def small_cases(chinook: Path) -> list[EvalCase]:
    """Six cases over Chinook (``chinook``: the database file, whose rows they expect)."""
    artists_sql = "SELECT COUNT(*) AS artist_count FROM Artist"
    employees_sql = "SELECT COUNT(*) AS employee_count FROM Employee"
    top_sql = (
        "SELECT c.CustomerId, ROUND(SUM(i.Total), 2) AS total FROM Customer c "
        "JOIN Invoice i ON i.CustomerId = c.CustomerId GROUP BY c.CustomerId "
        "ORDER BY total DESC, c.CustomerId LIMIT 3"
    )
    genres_sql = "SELECT Name FROM Genre WHERE Name LIKE 'R%' ORDER BY Name"
    count_star = {"kind": "function", "name": "count", "args": [{"kind": "star"}]}
    return [
        EvalCase(
            id="small_001",
            question="How many artists are there?",
            datasources=["chinook"],
            status="approved",
            difficulty="easy",
            tags=["single-table", "aggregation"],
            outcome={"admin": "allowed", "analyst": "allowed", "viewer": "allowed"},
            tables=["Artist"],
            columns=["Artist.ArtistId"],
            sql=artists_sql,
            rows=_rows(chinook, artists_sql),
            plan={"select": [{"expr": count_star, "alias": "artist_count"}], "from": {"name": "Artist"}},
        ),
        EvalCase(
            id="small_002",
            question="How many employees do we have?",
            datasources=["chinook"],
            status="approved",
            difficulty="easy",
            tags=["single-table", "rbac-denial"],
            outcome={"admin": "allowed", "analyst": "refused", "viewer": "refused"},
            tables=["Employee"],
            columns=["Employee.EmployeeId"],
            sql=employees_sql,
            rows=_rows(chinook, employees_sql),
            plan={"select": [{"expr": count_star, "alias": "employee_count"}], "from": {"name": "Employee"}},
        ),
        EvalCase(
            id="small_003",
            question="Who are the top 3 customers by total spend?",
            datasources=["chinook"],
            status="approved",
            difficulty="medium",
            tags=["join", "aggregation", "order-limit", "rbac-denial"],
            outcome={"admin": "allowed", "analyst": "allowed", "viewer": "refused"},
            tables=["Customer", "Invoice"],
            columns=["Customer.CustomerId", "Invoice.CustomerId", "Invoice.Total"],
            order_matters=True,
            sql=top_sql,
            rows=_rows(chinook, top_sql),
            plan={
                "select": [
                    {"expr": _col("CustomerId", "c")},
                    {
                        "expr": {
                            "kind": "function",
                            "name": "round",
                            "args": [
                                {"kind": "function", "name": "sum", "args": [_col("Total", "i")]},
                                {"kind": "literal", "value": 2},
                            ],
                        },
                        "alias": "total",
                    },
                ],
                "from": {"name": "Customer", "alias": "c"},
                "joins": [
                    {
                        "table": {"name": "Invoice", "alias": "i"},
                        "on": {"kind": "binary", "op": "=", "left": _col("CustomerId", "i"),
                               "right": _col("CustomerId", "c")},
                    }
                ],
                "group_by": [_col("CustomerId", "c")],
                "order_by": [
                    {"expr": _col("total"), "direction": "desc"},
                    {"expr": _col("CustomerId", "c")},
                ],
                "limit": 3,
            },
        ),
        EvalCase(
            id="small_004",
            question="What will the weather be in Paris tomorrow?",
            datasources=["chinook"],
            status="approved",
            tags=["unanswerable"],
            outcome={"admin": "unanswerable", "analyst": "unanswerable", "viewer": "unanswerable"},
        ),
        EvalCase(
            id="small_005",
            question="Which genres start with R?",
            datasources=["chinook"],
            status="approved",
            tags=["filter", "single-table"],
            outcome={"admin": "allowed", "analyst": "allowed", "viewer": "clarify"},
            tables=["Genre"],
            columns=["Genre.Name"],
            order_matters=False,
            sql=genres_sql,
            rows=_rows(chinook, genres_sql),
            plan={
                "select": [{"expr": _col("Name")}],
                "from": {"name": "Genre"},
                "where": {"kind": "binary", "op": "like", "left": _col("Name"),
                          "right": {"kind": "literal", "value": "R%"}},
                "order_by": [{"expr": _col("Name")}],
            },
        ),
        EvalCase(
            id="small_draft",
            question="A draft that never runs",
            datasources=["chinook"],
            status="draft",
            outcome={"admin": "allowed"},
        ),
    ]


def write_small_suite(folder: Path, cases: list[EvalCase], name: str = "small") -> Path:
    path = folder / f"{name}.yaml"
    write_suite(EvalSuite(cases=cases), path)
    return path


def small_project(folder: Path, chinook: Path, **evals: Any) -> ProjectConfig:
    suite = write_small_suite(folder, small_cases(chinook))
    config = ProjectConfig(
        datasources=[DatasourceConfig(id="chinook", engine="sqlite", path=chinook, description="Music store")],
        policies=demo_policies(),
        evals=EvalsConfig(suites=[suite], **evals),
    )
    config.root = folder
    return config


# ================================================================ tests

import logging  # noqa: E402
from collections import Counter  # noqa: E402

import pytest  # noqa: E402

from nl2sql_assets.config import CuratedAnswer, LLMConfig, PriceRow  # noqa: E402
from nl2sql_assets.datasources.registry import DatasourceRegistry  # noqa: E402
from nl2sql_assets.engine.events import EVAL_CASE, EVAL_FINISHED, RUN_STARTED, Event, EventBus  # noqa: E402
from nl2sql_assets.errors import RunRefused  # noqa: E402
from nl2sql_assets.evaluation.judging.scorers import NoConfig, Score  # noqa: E402
from nl2sql_assets.evaluation.reporting import EvalReport  # noqa: E402
from nl2sql_assets.evaluation.running import rows_sha256  # noqa: E402
from nl2sql_assets.evaluation.running.gold_llm import GoldLLMServer  # noqa: E402
from nl2sql_assets.evaluation.running.results import CaseRecord  # noqa: E402
from nl2sql_assets.evaluation.running.scorers import ScorerRegistry  # noqa: E402
from nl2sql_assets.evaluation.running.selection import SelectionError  # noqa: E402
from nl2sql_assets.evaluation.suites import suite_digest  # noqa: E402
from nl2sql_assets.llm.prices import UnknownPriceError  # noqa: E402
from nl2sql_assets.project import Project  # noqa: E402

ROLE_RUNS = 14  # 3 + 3 + 3 + 3 + 2: small_005's viewer run expects clarify and is skipped


def run_eval(config: ProjectConfig, *, bus: EventBus | None = None, scorer_registry: ScorerRegistry | None = None,
             **options: Any) -> EvalReport:
    """A run as a project makes it (``project.evals.run``), on the bus the test's gold servers hear."""
    with Project(config, bus=bus, scorers=scorer_registry) as project:
        return project.evals.run(**options)


@pytest.fixture(scope="module")
def cases(chinook_path: Path) -> list[EvalCase]:
    return small_cases(chinook_path)


@pytest.fixture
def project(tmp_path: Path, chinook_path: Path) -> ProjectConfig:
    return small_project(tmp_path, chinook_path)


def _by_key(records: list[CaseRecord]) -> dict[tuple[str, str], CaseRecord]:
    return {(r.case_id, r.role): r for r in records}


# ---------------------------------------------------------------- mode plans


def test_plans_passes_every_case_for_every_role(project: ProjectConfig) -> None:
    report = run_eval(project, mode="plans")
    assert list(report.configs) == ["plans"]
    board = report.configs["plans"]
    assert board.summary.total == {"pass": ROLE_RUNS, "fail": 0, "error": 0, "env_error": 0, "skip": 0}, [
        (r.case_id, r.role, r.reason) for r in board.results if r.status != "pass"
    ]
    assert report.accuracy == 1.0
    assert report.skipped == 1
    assert report.roles == ["admin", "analyst", "viewer"]
    assert report.scorers == ["result_match", "policy", "outcome"]  # the other three cannot score mode plans
    assert (report.mode, report.curated, report.max_cost_usd, report.spent, report.stopped) == (
        "plans", False, None, 0.0, None)
    suite_path = project.evals_config.suites[0]
    assert [(s.name, s.digest) for s in report.suites] == [("small", suite_digest(suite_path))]
    with DatasourceRegistry(project) as registry:
        fingerprint = registry.snapshot("chinook").fingerprint()
    assert [(d.datasource_id, d.engine, d.schema_fingerprint, d.tables) for d in report.databases] == [
        ("chinook", "sqlite", fingerprint, 11)]
    assert board.planned_cases == board.completed_cases == ROLE_RUNS
    assert set(board.models.values()) == {"openai/gold-plans"}

    records = _by_key(board.results)
    assert "small_draft" not in {r.case_id for r in board.results}
    artists = records[("small_001", "viewer")]
    assert (artists.status, artists.execution_status, artists.lenient_status) == ("pass", "pass", "pass")
    assert artists.rows_sha256 == rows_sha256([[275]]) and artists.row_count == 1
    assert artists.scores["result_match"].detail["matched"] == "rows"
    assert artists.cost_usd == 0.0 and artists.source == "generated"
    assert artists.sql and artists.plan and artists.answer
    assert artists.tags == ["single-table", "aggregation"] and artists.difficulty == "easy"
    refused = records[("small_002", "analyst")]
    assert (refused.error_code, refused.row_count) == ("SECURITY_VIOLATION", None)
    assert refused.scores["result_match"].passed is None  # does not apply to a refused role
    assert records[("small_004", "admin")].error_code == "QUESTION_NOT_ANSWERABLE"
    assert records[("small_003", "admin")].row_count == 3


@pytest.mark.parametrize(
    ("cases", "roles", "expected"),
    [
        (["small_002"], None, {("small_002", "admin"), ("small_002", "analyst"), ("small_002", "viewer")}),
        (["rbac-denial"], ["viewer"], {("small_002", "viewer"), ("small_003", "viewer")}),
        (["small_001", "filter"], ["admin"], {("small_001", "admin"), ("small_005", "admin")}),
        (None, ["analyst"], {("small_001", "analyst"), ("small_002", "analyst"), ("small_003", "analyst"),
                             ("small_004", "analyst"), ("small_005", "analyst")}),
    ],
)
def test_selectors_and_roles_narrow_the_run(project: ProjectConfig, cases: list[str] | None,
                                            roles: list[str] | None, expected: set[tuple[str, str]]) -> None:
    report = run_eval(project, mode="plans", cases=cases, roles=roles)
    records = report.first_board.results
    assert {(r.case_id, r.role) for r in records} == expected
    assert all(r.status == "pass" for r in records)
    assert report.roles == sorted({role for _, role in expected})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cases": ["small_001", "no_such_case"]}, r"'no_such_case' match no approved case"),
        ({"cases": ["small_draft"]}, r"'small_draft' match no approved case"),
        ({"roles": ["auditor"]}, r"\['auditor'\] appear in no selected case"),
        ({"cases": ["small_002"], "roles": ["ghost", "admin"]}, r"\['ghost'\]"),
        ({"scorers": ["outcome", "speed"]}, r"unknown scorer.*'speed'"),
    ],
)
def test_bad_selections_are_clear_errors(project: ProjectConfig, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        run_eval(project, mode="plans", **kwargs)
    if "cases" in kwargs or "roles" in kwargs:
        assert isinstance(info.value, SelectionError)


def test_an_unknown_scorer_in_evals_yaml_names_the_file_and_field(tmp_path: Path, chinook_path: Path,
                                                                  cases: list[EvalCase]) -> None:
    from nl2sql_assets.config import load_config

    suite = write_small_suite(tmp_path, cases)
    (tmp_path / "my_evals.yaml").write_text(f"suites: [{suite.name}]\nscorers: [outcome, routng]\n",
                                            encoding="utf-8")
    (tmp_path / "nl2sql.yaml").write_text(
        f"datasources:\n- {{id: chinook, engine: sqlite, path: {chinook_path}}}\nevals: {{file: my_evals.yaml}}\n",
        encoding="utf-8")
    config = load_config(tmp_path / "nl2sql.yaml")
    with pytest.raises(ValueError, match=r"my_evals\.yaml: scorers: unknown scorer\(s\) \['routng'\]"):
        run_eval(config, mode="plans")


def test_clarify_runs_are_skipped_and_counted_unless_asked_for(project: ProjectConfig) -> None:
    skipped = run_eval(project, mode="plans", cases=["small_005"])
    assert skipped.skipped == 1 and len(skipped.first_board.results) == 2
    asked = run_eval(project, mode="plans", cases=["small_005"], clarify=True)
    assert (asked.skipped, asked.clarify) == (0, True)
    by_key = _by_key(asked.first_board.results)
    viewer = by_key[("small_005", "viewer")]
    assert viewer.expected == "clarify"
    # The resolver asked back (the gold server serves it for the clarify role): nothing ran.
    assert viewer.status == "pass", viewer.reason
    assert viewer.result_status == "needs_clarification" and viewer.sql is None and viewer.row_count is None
    assert viewer.clarification and viewer.clarification.endswith("?")
    assert by_key[("small_005", "admin")].status == "pass"  # the other roles are answered
    assert by_key[("small_005", "admin")].clarification is None


def test_curated_paraphrases_are_found_by_the_curated_node_and_still_policy_checked(
        project: ProjectConfig, cases: list[EvalCase]) -> None:
    artists, employees = cases[0], cases[1]
    project.curated = [
        CuratedAnswer(question="What is the number of artists?", sql=artists.sql or "", datasource="chinook"),
        CuratedAnswer(question="Count the staff members.", sql=employees.sql or "", datasource="chinook"),
    ]
    report = run_eval(project, mode="plans", cases=["small_001", "small_002", "small_003"], curated=True)
    by_key = _by_key(report.first_board.results)
    assert [(k, r.reason) for k, r in by_key.items() if r.status != "pass"] == []
    for role in ("admin", "analyst", "viewer"):  # a paraphrase: the model call found it
        record = by_key[("small_001", role)]
        assert (record.source, record.curated_match) == ("verified", "paraphrase")
        assert "curated" in record.usage and "planner" not in record.usage
    assert (by_key[("small_002", "admin")].source, by_key[("small_002", "admin")].curated_match) == (
        "verified", "paraphrase")
    for role in ("analyst", "viewer"):  # the verified SQL reads what they may not: never run for them
        record = by_key[("small_002", role)]
        assert record.source == "generated" and record.curated_match is None
        assert record.error_code == "SECURITY_VIOLATION"
    other = by_key[("small_003", "admin")]  # no verified question asks it: the generated path
    assert other.source == "generated" and "curated" in other.usage and "planner" in other.usage
    hits = report.first_board.curated
    assert hits is not None and (hits.paraphrase, hits.exact) == (4, 0)
    assert hits.hit_rate == pytest.approx(4 / hits.runs)
    # Curated answers stay off in mode plans unless asked for.
    plain = run_eval(project, mode="plans", cases=["small_001"])
    assert plain.first_board.curated is None
    assert {r.source for r in plain.first_board.results} == {"generated"}


def test_two_passes_and_exact_pass_numbers(project: ProjectConfig) -> None:
    two = run_eval(project, mode="plans", passes=2, cases=["small_001", "small_002"])
    records = two.first_board.results
    assert two.passes == 2
    assert Counter(r.pass_index for r in records) == {1: 6, 2: 6}
    assert two.first_board.accuracy.pass_k.overall.rate == 1.0
    assert two.first_board.determinism is not None and two.first_board.determinism.rate == 1.0
    third = run_eval(project, mode="plans", pass_numbers=[3], cases=["small_001"])
    assert [r.pass_index for r in third.first_board.results] == [3, 3, 3]
    assert third.passes == 1


def test_events_and_on_case(project: ProjectConfig) -> None:
    bus = EventBus()
    events: list[Event] = []
    bus.subscribe("*", events.append)
    seen: list[tuple[str, str, str, float]] = []
    report = run_eval(project, mode="plans", bus=bus, cases=["small_001", "small_002"],
                      on_case=lambda config, record, spent: seen.append((config, record.case_id, record.role, spent)))
    started = [e for e in events if e.topic == RUN_STARTED]
    assert len(started) == 6
    assert {e.payload["context"]["case_id"] for e in started} == {"small_001", "small_002"}
    assert {e.payload["context"]["suite"] for e in started} == {"small"}
    assert {e.payload["context"]["pass"] for e in started} == {1}
    cases = [e.payload for e in events if e.topic == EVAL_CASE]
    assert len(cases) == 6
    one = next(p for p in cases if (p["case"], p["role"]) == ("small_002", "viewer"))
    assert one["suite"] == "small" and one["passed"] is True and one["source"] == "generated"
    assert one["scores"] == {"result_match": None, "policy": None, "outcome": True} and one["cost_usd"] == 0.0
    finished = [e.payload for e in events if e.topic == EVAL_FINISHED]
    assert len(finished) == 1 and events[-1].topic == EVAL_FINISHED
    assert finished[0]["suites"] == ["small"] and finished[0]["cases"] == 6
    assert (finished[0]["accuracy"], finished[0]["accuracy_generated"], finished[0]["spent"]) == (1.0, 1.0, 0.0)
    assert sorted(seen) == sorted(("plans", r.case_id, r.role, 0.0) for r in report.first_board.results)


def test_plans_needs_a_plan_for_every_answerable_case(tmp_path: Path, project: ProjectConfig,
                                                      chinook_path: Path) -> None:
    cases = small_cases(chinook_path)
    cases[2] = cases[2].model_copy(update={"plan": None})
    path = write_small_suite(tmp_path, cases, name="noplan")
    with pytest.raises(RunRefused, match=r"plan.*noplan:small_003"):
        run_eval(project, mode="plans", suites=[path])
    # An unanswerable case needs none, and a selection without the case runs.
    report = run_eval(project, mode="plans", suites=[path], cases=["small_004"])
    assert report.first_board.summary.total["pass"] == 3


class Boom:
    interface_version = 1
    config_model = NoConfig
    modes = frozenset({"plans", "full"})

    @classmethod
    def from_config(cls, cfg: Any) -> Boom:
        return cls()

    def score(self, run: Any) -> Score:
        raise RuntimeError(f"cannot score {run.case.id}")


def test_a_raising_scorer_marks_the_case_error_and_the_run_goes_on(project: ProjectConfig) -> None:
    registry = ScorerRegistry.builtins()
    registry.add("boom", Boom)
    report = run_eval(project, mode="plans", cases=["small_001"], scorers=["result_match", "outcome", "boom"],
                      scorer_registry=registry)
    records = report.first_board.results
    assert len(records) == 3
    for record in records:
        assert record.status == "error"
        assert record.reason == "boom: error: RuntimeError: cannot score small_001"
        assert record.execution_status == "pass"  # result_match and outcome still scored it
        assert record.scores["boom"].detail == {"error": "RuntimeError: cannot score small_001"}
    assert report.first_board.summary.total["error"] == 3
    assert report.first_board.scores["boom"].errored == 3


# ---------------------------------------------------------------- mode full, on two gold servers

USAGE = {"prompt_tokens": 1000, "completion_tokens": 200, "cached_tokens": 400, "reasoning_tokens": 50}
PRICE = PriceRow(input=2.0, cached_input=0.5, cache_write=2.5, output=8.0, source="test")
PER_CALL = (600 * 2.0 + 400 * 0.5 + 200 * 8.0) / 1_000_000  # $0.003
CALLS = {"allowed": 4, "refused": 3, "unanswerable": 1}  # resolver..synthesizer / ..planner / resolver


def _priced(server: GoldLLMServer) -> LLMConfig:
    return server.llm_config().model_copy(update={"prices": {"gold-plans": PRICE}})


def _wrong_plan_cases(chinook: Path) -> list[EvalCase]:
    """small_001 asks how many artists; this server's plan counts albums instead."""
    cases = small_cases(chinook)
    data = cases[0].model_dump(by_alias=True)
    data["plan"]["from"] = {"name": "Album"}
    cases[0] = EvalCase.model_validate(data)
    return cases


@pytest.fixture
def servers(chinook_path: Path):
    bus = EventBus()
    good = GoldLLMServer(small_cases(chinook_path), bus, usage=USAGE, synthesizer="rows")
    bad = GoldLLMServer(_wrong_plan_cases(chinook_path), bus, usage=USAGE, synthesizer="rows")
    with good, bad:
        yield bus, good, bad


def test_full_compares_two_configs_and_prices_every_call(project: ProjectConfig, servers: Any) -> None:
    bus, good, bad = servers
    spent_seen: list[float] = []
    report = run_eval(project, mode="full", llm={"good": _priced(good), "bad": _priced(bad)}, bus=bus,
                      max_cost_usd=10, on_case=lambda c, r, spent: spent_seen.append(spent))
    assert list(report.configs) == ["good", "bad"]
    good_board, bad_board = report.configs["good"], report.configs["bad"]
    assert report.scorers == ["result_match", "policy", "outcome", "faithfulness", "retrieval_recall", "routing"]
    assert good_board.summary.total == {"pass": ROLE_RUNS, "fail": 0, "error": 0, "env_error": 0, "skip": 0}, [
        (r.case_id, r.role, r.reason) for r in good_board.results if r.status != "pass"]
    assert good_board.models == dict.fromkeys(good_board.models, "openai/gold-plans")

    # The wrong plan: wrong rows for every role that gets an answer, and an answer the rows do not hold.
    wrong = [r for r in bad_board.results if r.status != "pass"]
    assert {(r.case_id, r.role) for r in wrong} == {("small_001", "admin"), ("small_001", "analyst"),
                                                    ("small_001", "viewer")}
    for record in wrong:
        assert record.scores["result_match"].passed is False
        assert record.reason.startswith("result_match: ")
        assert record.faithfulness == {"faithful": False, "unsupported_numbers": ["275"],
                                       "unsupported_entities": [], "checked": 1}
        assert record.execution_status == "fail"
    diff = report.comparison.differences[0]
    assert (diff.reference, diff.config) == ("good", "bad")
    assert diff.passes_only_in_reference == ["small_001@admin", "small_001@analyst", "small_001@viewer"]
    assert diff.passes_only_here == []

    # Dollars: every call priced from the config's price row, nothing else.
    for record in good_board.results + bad_board.results:
        calls = CALLS[record.expected]
        assert sum(u.input_tokens for u in record.usage.values()) == calls * 1000
        assert record.cost_usd == pytest.approx(calls * PER_CALL)
    total_calls = good.requests + bad.requests
    assert total_calls == 2 * sum(CALLS[r.expected] for r in good_board.results)
    assert report.spent == pytest.approx(total_calls * PER_CALL)
    assert good_board.cost.total_usd + bad_board.cost.total_usd == pytest.approx(report.spent)
    assert spent_seen == sorted(spent_seen) and spent_seen[-1] == pytest.approx(report.spent)
    assert good_board.tokens_by_node["planner"].cached_tokens == 400 * 11
    assert good_board.tokens_by_node["planner"].reasoning_tokens == 50 * 11
    # The engine's whole-schema retrieval sends every needed column, and routing picked chinook.
    assert good_board.retrieval is not None and good_board.retrieval.column_recall == 1.0
    assert (report.curated, report.max_cost_usd, report.stopped) == (True, 10, None)


def test_the_cap_stops_mid_run_with_a_partial_report(project: ProjectConfig, servers: Any) -> None:
    bus, good, bad = servers
    cap = 0.05
    report = run_eval(project, mode="full", llm={"good": _priced(good), "bad": _priced(bad)}, bus=bus,
                      max_cost_usd=cap)
    assert report.stopped == "max_cost"
    records = [r for b in report.configs.values() for r in b.results]
    costs = [r.cost_usd for r in records]
    most = max(costs)
    assert report.spent == pytest.approx(sum(costs))
    assert report.spent <= cap + most
    assert report.spent + most > cap  # it did not stop while another case surely fitted
    # Each small_001 run costs 4 calls ($0.012): runs 1-4 fit ($0.048), the fifth could pass $0.05.
    assert len(records) == 4
    for board in report.configs.values():
        assert board.planned_cases == ROLE_RUNS
        assert board.completed_cases == 2 < board.planned_cases
    # Configs go side by side, so a stopped run asked both the same cases.
    assert {(r.case_id, r.role) for r in report.configs["good"].results} == {
        (r.case_id, r.role) for r in report.configs["bad"].results}


def test_the_first_case_always_runs(project: ProjectConfig, servers: Any) -> None:
    bus, good, _ = servers
    report = run_eval(project, mode="full", llm=_priced(good), bus=bus, max_cost_usd=0.001)
    assert list(report.configs) == ["default"]
    assert report.stopped == "max_cost"
    assert len(report.first_board.results) == 1
    assert report.spent == pytest.approx(4 * PER_CALL)


def test_an_unpriced_model_fails_before_any_call(project: ProjectConfig, servers: Any) -> None:
    bus, good, bad = servers
    with pytest.raises(UnknownPriceError, match=r"gold-plans.*config 'bad'"):
        run_eval(project, mode="full", llm={"good": _priced(good), "bad": bad.llm_config()}, bus=bus,
                 max_cost_usd=10)
    assert good.requests == bad.requests == 0


def test_mode_full_without_a_cap_is_refused(project: ProjectConfig, servers: Any) -> None:
    bus, good, _ = servers
    assert project.evals_config.max_cost_usd is None
    with pytest.raises(RunRefused, match="max_cost_usd"):
        run_eval(project, mode="full", llm=_priced(good), bus=bus)
    assert good.requests == 0
    project.evals_config.max_cost_usd = 1.0  # evals.yaml's cap is used when the argument is left out
    report = run_eval(project, mode="full", llm=_priced(good), bus=bus, cases=["small_004"])
    assert report.max_cost_usd == 1.0 and good.requests == 3


def test_two_passes_in_mode_full_ask_the_planner_again(project: ProjectConfig, servers: Any) -> None:
    bus, good, _ = servers
    assert project.settings.plan_cache is True  # the runtime turns it off anyway
    report = run_eval(project, mode="full", llm=_priced(good), bus=bus, max_cost_usd=10, passes=2)
    planner_runs = sum(1 for r in report.first_board.results if r.expected in ("allowed", "refused"))
    assert planner_runs == 2 * 11
    assert good.requests_by_schema["PlanModel"] == planner_runs
    assert report.settings["plan_cache"] is False


def test_a_verified_answer_runs_again_on_the_generated_path(project: ProjectConfig, servers: Any,
                                                           cases: list[EvalCase]) -> None:
    bus, good, _ = servers
    artists = cases[0]
    project.curated = [CuratedAnswer(question=artists.question, sql=artists.sql or "", datasource="chinook")]
    report = run_eval(project, mode="full", llm=_priced(good), bus=bus, max_cost_usd=10, cases=["small_001"])
    for record in report.first_board.results:
        assert record.source == "verified" and record.status == "pass"
        assert record.generated is not None
        assert (record.generated.source, record.generated.status) == ("generated", "pass")
        assert record.cost_usd == pytest.approx(1 * PER_CALL)  # the verified path only writes the answer
        assert record.generated.cost_usd == pytest.approx(4 * PER_CALL)
    assert report.spent == pytest.approx(3 * 5 * PER_CALL)
    assert report.first_board.accuracy.by_source["verified"].rate == 1.0

    off = run_eval(project, mode="full", llm=_priced(good), bus=bus, max_cost_usd=10, cases=["small_001"],
                   curated=False)
    assert {(r.source, r.generated) for r in off.first_board.results} == {("generated", None)}
    assert off.curated is False


def test_calls_without_usage_are_estimated_priced_and_flagged(project: ProjectConfig,
                                                              caplog: pytest.LogCaptureFixture,
                                                              cases: list[EvalCase]) -> None:
    bus = EventBus()
    with GoldLLMServer(cases, bus, usage={"prompt_tokens": 0, "completion_tokens": 0}) as server:
        config = server.llm_config().model_copy(update={"prices": {"gold-plans": PRICE}})
        with caplog.at_level(logging.WARNING, logger="nl2sql_assets.evaluation.running.runner"):
            report = run_eval(project, mode="full", llm=config, bus=bus, max_cost_usd=1, cases=["small_001"])
    board = report.first_board
    # Every call was counted with the tokenizer and priced: nothing is free, nothing is null.
    assert report.spent > 0
    assert board.cost.total_usd == pytest.approx(report.spent)
    assert board.cost.unknown_cost_calls == 0
    assert board.cost.estimated_calls == 12 and board.cost.token_source == "estimated"
    assert report.configs["default"].cost.token_source == "estimated"
    for record in board.results:
        assert record.cost_usd is not None and record.cost_usd > 0
        assert record.token_source == "estimated" and record.estimated_calls == 4
    # One warning, at the end, with the exact count.
    [warning] = [m for m in caplog.messages if "counted with the model's tokenizer" in m]
    assert "12 model call(s)" in warning


def test_mode_full_rejects_bad_llm_arguments(project: ProjectConfig) -> None:
    with pytest.raises(ValueError, match="invalid config name"):
        run_eval(project, mode="full", llm={"a|b": LLMConfig()}, max_cost_usd=1)
    with pytest.raises(RunRefused, match="mode plans always runs on the gold LLM"):
        run_eval(project, mode="plans", llm=LLMConfig())
    with pytest.raises(RunRefused, match="mode retrieval calls no model"):
        run_eval(project, mode="retrieval", llm=LLMConfig())
    with pytest.raises(RunRefused, match="expected full, plans or retrieval"):
        run_eval(project, mode="turbo")


# Cancelling the other in-flight case runs can leave one of litellm's inner coroutines unawaited.
@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")
def test_a_failing_on_case_callback_stops_the_run_with_its_own_error(project: ProjectConfig) -> None:
    def on_case(config: str, record: CaseRecord, spent: float) -> None:
        raise KeyError(f"listener broke on {record.case_id}")

    with pytest.raises(KeyError, match="listener broke on small_001"):
        run_eval(project, mode="plans", cases=["small_001"], on_case=on_case)


def test_a_role_the_policy_does_not_define_is_named(tmp_path: Path, project: ProjectConfig,
                                                   chinook_path: Path) -> None:
    cases = small_cases(chinook_path)
    cases[0] = cases[0].model_copy(update={"outcome": {"admin": "allowed", "auditor": "allowed"}})
    path = write_small_suite(tmp_path, cases, name="roles")
    with pytest.raises(SelectionError, match=r"case 'small_001'.*role 'auditor'.*policy does not define"):
        run_eval(project, mode="plans", suites=[path])


@pytest.mark.parametrize("model", ["openai/gpt-4o", "anthropic/claude-sonnet-5"])
def test_mode_full_without_a_key_is_refused_before_any_call(project: ProjectConfig, monkeypatch, model: str) -> None:
    from nl2sql_assets.config import ModelSettings

    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    llm = LLMConfig(default=ModelSettings(model=model, api_key=""))
    with pytest.raises(RunRefused, match=r"(?s)no API key.*nodes resolver, decomposer.*_API_KEY"):
        run_eval(project, mode="full", llm=llm, max_cost_usd=1)


def test_a_run_keeps_the_heap_out_of_full_collections_and_gives_it_back_after(
        project: ProjectConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    """While any run is going, what was alive when it started is frozen (no full collection scans
    it); when the last run ends, it is unfrozen, so garbage made meanwhile is still collected."""
    import gc

    from nl2sql_assets.evaluation.running.heap import frozen_heap

    assert gc.get_freeze_count() == 0
    frozen_during: list[int] = []
    run_eval(project, mode="plans", cases=["small_001"], on_case=lambda c, r, s: frozen_during.append(gc.get_freeze_count()))
    assert frozen_during and all(n > 0 for n in frozen_during)
    assert gc.get_freeze_count() == 0
    # Nested runs (two threads at once): the heap is frozen once, when the first starts, and given
    # back once, when the last ends. The calls are counted, not the objects (their number also
    # falls as frozen objects die by reference counting, so it proves nothing).
    calls: list[str] = []
    real_freeze, real_unfreeze = gc.freeze, gc.unfreeze
    monkeypatch.setattr(gc, "freeze", lambda: (calls.append("freeze"), real_freeze())[1])
    monkeypatch.setattr(gc, "unfreeze", lambda: (calls.append("unfreeze"), real_unfreeze())[1])
    with frozen_heap():
        with frozen_heap():  # a second run at the same time (another thread)
            assert calls == ["freeze"] and gc.get_freeze_count() > 0
        assert calls == ["freeze"] and gc.get_freeze_count() > 0, "the first run is still going"
    assert calls == ["freeze", "unfreeze"] and gc.get_freeze_count() == 0
