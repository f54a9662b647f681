"""Role-bound reads under attack, on the demo databases and the demo policy.

Each attack is tried every way SQL reaches a database under a role: as a plan through the
engine (the gold LLM serves it over HTTP), as a curated answer, and as a seed draft; the SQL
ones also straight through ``check_sql``. An attack holds when it is refused or harmless:
nothing it asked for is returned, and the executor never sees its SQL (dangerous functions,
which the engines themselves refuse, may reach the executor and fail there).

The tables are grouped by attack class; ``ATTACK_COUNTS`` tallies them for the closing note.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from nl2sql_assets.config import CuratedAnswer, LLMConfig, ProjectConfig, load_config
from nl2sql_assets.datasources.base import DatasourceError
from nl2sql_assets.datasources.registry import DatasourceRegistry
from nl2sql_assets.engine import pipeline
from nl2sql_assets.engine.events import RUN_STARTED, Event, EventBus
from nl2sql_assets.engine.pipeline import Engine, RuntimeOptions
from nl2sql_assets.engine.result import SECURITY_VIOLATION
from nl2sql_assets.evaluation.running.gold_llm import GoldLLMServer
from nl2sql_assets.evaluation.suites import EvalCase
from nl2sql_assets.evaluation.suites.seed import seed
from nl2sql_assets.policy import GENERIC_REFUSAL, check_sql

# ---------------------------------------------------------------- SQL attacks: (class, datasource, role, sql)

SQL_ATTACKS: list[tuple[str, str, str, str]] = [
    # An alias named like a denied column, used inside an ORDER BY expression (the engines read the column).
    ("order_by_alias", "support", "viewer", "SELECT ticket_id AS customer_id FROM tickets ORDER BY (customer_id = 17) DESC"),
    ("order_by_alias", "support", "viewer", "SELECT ticket_id AS customer_id FROM tickets ORDER BY customer_id + 0 DESC"),
    ("order_by_alias", "support", "viewer", "SELECT ticket_id AS customer_id FROM tickets "
                                            "ORDER BY CASE WHEN customer_id = 17 THEN 0 ELSE 1 END"),
    ("order_by_alias", "support", "viewer", "SELECT ticket_id AS customer_id FROM tickets ORDER BY abs(customer_id - 17)"),
    ("order_by_alias", "support", "viewer", "SELECT agent_id AS name FROM agents ORDER BY (name LIKE 'A%') DESC"),
    ("order_by_alias", "support", "analyst", "SELECT message_id AS body FROM ticket_messages "
                                             "ORDER BY (body LIKE '%refund%') DESC"),
    ("order_by_alias", "support", "analyst", "SELECT message_id AS body FROM ticket_messages ORDER BY length(body) DESC"),
    ("order_by_alias", "webanalytics", "viewer", "SELECT session_id AS customer_id FROM sessions "
                                                 "ORDER BY (customer_id = 17) DESC"),
    ("order_by_alias", "webanalytics", "viewer", "SELECT conversion_id AS customer_id FROM conversions "
                                                 "ORDER BY customer_id IS NULL"),
    # ... in GROUP BY, HAVING and window clauses.
    ("group_by_alias", "support", "viewer", "SELECT COUNT(*) AS customer_id FROM tickets GROUP BY customer_id"),
    ("group_by_alias", "support", "viewer", "SELECT COUNT(*) AS n FROM tickets GROUP BY (customer_id = 17)"),
    ("group_by_alias", "support", "viewer", "SELECT status AS customer_id, COUNT(*) FROM tickets GROUP BY status, customer_id"),
    ("group_by_alias", "support", "analyst", "SELECT COUNT(*) AS body FROM ticket_messages GROUP BY body"),
    ("having_alias", "support", "viewer", "SELECT ticket_id AS customer_id FROM tickets GROUP BY ticket_id "
                                          "HAVING customer_id = 17"),
    ("having_alias", "support", "viewer", "SELECT status FROM tickets GROUP BY status HAVING MAX(customer_id) = 17"),
    ("having_alias", "support", "viewer", "SELECT COUNT(*) AS customer_id FROM tickets HAVING SUM(customer_id) > 0"),
    ("having_alias", "support", "analyst", "SELECT sender FROM ticket_messages GROUP BY sender "
                                           "HAVING MAX(length(body)) > 10"),
    ("window", "support", "viewer", "SELECT ticket_id, ROW_NUMBER() OVER (ORDER BY customer_id) AS r FROM tickets"),
    ("window", "support", "viewer", "SELECT ticket_id AS customer_id, COUNT(*) OVER (PARTITION BY customer_id) AS n "
                                    "FROM tickets"),
    ("window", "support", "viewer", "SELECT ticket_id FROM tickets "
                                    "QUALIFY ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY ticket_id) = 1"),
    ("window", "support", "analyst", "SELECT message_id, RANK() OVER (ORDER BY body) AS r FROM ticket_messages"),
    ("window", "chinook", "analyst", "SELECT CustomerId, ROW_NUMBER() OVER "
                                     "(ORDER BY (SELECT MAX(BirthDate) FROM Employee)) AS r FROM Customer"),
    # Sub-queries: correlated, IN, scalar, derived tables.
    ("subquery", "support", "viewer", "SELECT t.ticket_id FROM tickets t WHERE EXISTS "
                                      "(SELECT 1 FROM tickets u WHERE u.ticket_id = t.ticket_id AND u.customer_id = 17)"),
    ("subquery", "support", "viewer", "SELECT ticket_id FROM tickets WHERE ticket_id IN "
                                      "(SELECT ticket_id FROM tickets WHERE customer_id = 17)"),
    ("subquery", "support", "viewer", "SELECT (SELECT MAX(name) FROM agents) AS x"),
    ("subquery", "support", "viewer", "SELECT d.ticket_id FROM (SELECT ticket_id, customer_id FROM tickets) AS d "
                                      "WHERE d.customer_id = 17"),
    ("subquery", "chinook", "analyst", "SELECT FirstName FROM Customer WHERE SupportRepId IN "
                                       "(SELECT EmployeeId FROM Employee WHERE BirthDate < '1960-01-01')"),
    ("subquery", "chinook", "analyst", "SELECT (SELECT BirthDate FROM Employee LIMIT 1) AS d"),
    ("subquery", "chinook", "viewer", "SELECT Name FROM Track WHERE TrackId IN (SELECT TrackId FROM InvoiceLine)"),
    ("subquery", "chinook", "viewer", "SELECT Name FROM Genre WHERE EXISTS "
                                      "(SELECT 1 FROM Customer WHERE Email LIKE 'a%')"),
    ("subquery", "chinook", "viewer", "SELECT Name FROM Track UNION ALL SELECT Email FROM Customer"),
    # A CTE named after a readable table, hiding what it really reads.
    ("cte_shadowing", "chinook", "analyst", "WITH Customer AS (SELECT FirstName, LastName, BirthDate FROM Employee) "
                                            "SELECT * FROM Customer"),
    ("cte_shadowing", "chinook", "analyst", "WITH Album AS (SELECT BirthDate AS Title FROM Employee) "
                                            "SELECT Title FROM Album"),
    ("cte_shadowing", "chinook", "viewer", "WITH Track AS (SELECT Email AS Name FROM Customer) SELECT Name FROM Track"),
    ("cte_shadowing", "chinook", "viewer", "WITH Genre AS (SELECT FirstName || ' ' || Email AS Name FROM Customer) "
                                           "SELECT Name FROM Genre"),
    ("cte_shadowing", "support", "viewer", "WITH agents AS (SELECT ticket_id AS agent_id, customer_id AS team "
                                           "FROM tickets) SELECT agent_id, team FROM agents"),
    ("cte_shadowing", "support", "viewer", "WITH tickets AS (SELECT customer_id AS ticket_id FROM tickets) "
                                           "SELECT ticket_id FROM tickets"),
    ("cte_shadowing", "support", "analyst", "WITH tickets AS (SELECT ticket_id, body AS subject FROM ticket_messages) "
                                            "SELECT subject FROM tickets"),
    # System tables and catalog functions, for every role.
    ("system_catalog", "chinook", "viewer", "SELECT name, sql FROM sqlite_master"),
    ("system_catalog", "chinook", "viewer", "SELECT * FROM pragma_table_info('Customer')"),
    ("system_catalog", "chinook", "analyst", "SELECT sql FROM sqlite_schema WHERE name = 'Employee'"),
    ("system_catalog", "chinook", "analyst", "SELECT name FROM sqlite_temp_master"),
    ("system_catalog", "support", "viewer", "SELECT * FROM duckdb_columns()"),
    ("system_catalog", "support", "viewer", "SELECT * FROM information_schema.columns"),
    ("system_catalog", "support", "viewer", "SELECT * FROM sqlite_master"),
    ("system_catalog", "support", "analyst", "SELECT * FROM duckdb_settings()"),
    ("system_catalog", "support", "analyst", "SELECT * FROM pg_catalog.pg_tables"),
    # Quoted and case-variant names.
    ("quoted_names", "chinook", "viewer", 'SELECT "EMAIL" FROM "customer"'),
    ("quoted_names", "chinook", "viewer", "SELECT [Email] FROM [CUSTOMER]"),
    ("quoted_names", "chinook", "viewer", "SELECT email FROM main.customer"),
    ("quoted_names", "chinook", "analyst", 'SELECT "BIRTHDATE" FROM "EMPLOYEE"'),
    ("quoted_names", "chinook", "analyst", 'SELECT e.BirthDate FROM "Employee" AS e'),
    ("quoted_names", "support", "viewer", 'SELECT "CUSTOMER_ID" FROM "Tickets"'),
    ("quoted_names", "support", "viewer", 'SELECT "Name" FROM AGENTS'),
    ("quoted_names", "support", "analyst", 'SELECT m."BODY" FROM "ticket_messages" m'),
    # SQLite's double-quoted strings: a quoted token that names a column the query can see is that
    # column (through aliases, joins, sub-queries, CTEs and correlation), never a string.
    ("double_quoted", "chinook", "viewer", 'SELECT Name FROM Genre WHERE EXISTS (SELECT 1 FROM Customer '
                                           'WHERE "Email" LIKE \'a%\')'),
    ("double_quoted", "chinook", "viewer", 'SELECT t.Name FROM Track t JOIN Customer c ON "Email" = t.Name'),
    ("double_quoted", "chinook", "viewer", 'SELECT "e" FROM (SELECT Email AS e FROM Customer)'),
    ("double_quoted", "chinook", "viewer", 'WITH c AS (SELECT * FROM Customer) SELECT "Email" FROM c'),
    ("double_quoted", "chinook", "analyst", 'SELECT "BirthDate" FROM Employee'),
    ("double_quoted", "chinook", "analyst", 'SELECT FirstName FROM Customer WHERE SupportRepId IN '
                                            '(SELECT EmployeeId FROM Employee WHERE "BirthDate" < "1960")'),
    ("double_quoted", "chinook", "analyst", 'SELECT c.FirstName FROM Customer c WHERE EXISTS (SELECT 1 FROM '
                                            'Employee e WHERE e.EmployeeId = c.SupportRepId AND "Title" = "x")'),
    ("double_quoted", "support", "viewer", 'SELECT ticket_id FROM tickets WHERE "customer_id" = 17'),
    ("double_quoted", "support", "analyst", 'SELECT m.ticket_id FROM ticket_messages m WHERE "body" LIKE \'%x%\''),
    # The row id is the table's (Employee's INTEGER PRIMARY KEY in SQLite): denied with the table.
    ("rowid", "chinook", "analyst", "SELECT rowid FROM Employee"),
    ("rowid", "chinook", "analyst", "SELECT c.FirstName FROM Customer c JOIN Employee e ON e.rowid = c.SupportRepId"),
    # Columns read without being selected: implicit join keys, aggregate clauses, lateral sub-queries.
    ("implicit_reads", "webanalytics", "viewer", "SELECT COUNT(*) AS n FROM sessions NATURAL JOIN conversions"),
    ("implicit_reads", "webanalytics", "viewer", "SELECT COUNT(*) AS n FROM sessions s JOIN conversions c "
                                                 "USING (customer_id)"),
    ("implicit_reads", "support", "viewer", "SELECT x.c FROM tickets t, LATERAL (SELECT t.customer_id AS c) AS x"),
    ("implicit_reads", "support", "viewer", "SELECT COUNT(*) FILTER (WHERE customer_id = 17) AS n FROM tickets"),
    ("implicit_reads", "support", "viewer", "SELECT arg_max(ticket_id, customer_id) AS t FROM tickets"),
    ("implicit_reads", "support", "viewer", "SELECT ticket_id FROM tickets WINDOW w AS (ORDER BY customer_id) "
                                            "QUALIFY row_number() OVER w = 1"),
    ("implicit_reads", "support", "viewer", "SELECT ticket_id FROM tickets WHERE (ticket_id, customer_id) = (1, 23)"),
    # Stars, whole rows and columns chosen by pattern or position (DuckDB).
    ("stars_and_rows", "support", "viewer", "SELECT * FROM tickets"),
    ("stars_and_rows", "support", "viewer", "SELECT t FROM tickets t"),
    ("stars_and_rows", "support", "viewer", "SELECT to_json(t) AS j FROM tickets t"),
    ("stars_and_rows", "support", "viewer", "SELECT COLUMNS('cust.*') FROM tickets"),
    ("stars_and_rows", "support", "viewer", "SELECT * LIKE 'cust%' FROM tickets"),
    ("stars_and_rows", "support", "viewer", "SELECT #2 FROM tickets"),
    ("stars_and_rows", "support", "viewer", "SELECT * FROM query_table('tickets')"),
    ("stars_and_rows", "support", "viewer", "SELECT * FROM query('SELECT customer_id FROM tickets')"),
    ("stars_and_rows", "support", "analyst", "SELECT * FROM ticket_messages"),
    ("stars_and_rows", "support", "analyst", "SELECT m FROM ticket_messages m"),
]  # fmt: skip

# Functions that read files or memory: refused by the engines themselves (SQLite's function
# allow-list, DuckDB without external access) or by the check (table functions).
DANGEROUS: list[tuple[str, str, str, str]] = [
    ("dangerous_function", "chinook", "analyst", "SELECT fts3_tokenizer('simple') AS p"),
    ("dangerous_function", "chinook", "analyst", "SELECT load_extension('/tmp/evil.so') AS x"),
    ("dangerous_function", "chinook", "analyst", "SELECT readfile('/etc/passwd') AS x"),
    ("dangerous_function", "chinook", "viewer", "SELECT writefile('/tmp/nl2sql-pwned', 'x') AS x"),
    ("dangerous_function", "chinook", "viewer", "SELECT hex(randomblob(16)) AS x"),
    ("dangerous_function", "support", "analyst", "SELECT * FROM read_csv('/etc/passwd')"),
    ("dangerous_function", "support", "analyst", "SELECT * FROM read_text('/etc/hostname')"),
    ("dangerous_function", "support", "viewer", "SELECT * FROM glob('/etc/*')"),
]

# ---------------------------------------------------------------- plan attacks: (class, datasource, role, plan)


def col(name: str, table: str | None = None) -> dict:
    return {"kind": "column", "name": name, **({"table": table} if table else {})}


def lit(value: Any) -> dict:
    return {"kind": "literal", "value": value}


def op(o: str, left: dict, right: dict) -> dict:
    return {"kind": "binary", "op": o, "left": left, "right": right}


def fn(name: str, *args: dict) -> dict:
    return {"kind": "function", "name": name, "args": list(args)}


COUNT = fn("count", {"kind": "star"})


def shadow(table: str, key: str, as_: str, order: dict, **extra: Any) -> dict:
    """SELECT key AS as_ FROM table ORDER BY <order> DESC: the alias names a denied column."""
    return {"select": [{"expr": col(key), "alias": as_}], "from": {"name": table},
            "order_by": [{"expr": order, "direction": "desc"}], **extra}


PLAN_ATTACKS: list[tuple[str, str, str, dict]] = [
    ("order_by_alias", "support", "viewer", shadow("tickets", "ticket_id", "customer_id", op("=", col("customer_id"), lit(17)))),
    ("order_by_alias", "support", "viewer", shadow("tickets", "ticket_id", "customer_id", op("+", col("customer_id"), lit(0)))),
    ("order_by_alias", "support", "viewer", shadow("tickets", "ticket_id", "customer_id", fn("abs", col("customer_id")))),
    ("order_by_alias", "support", "viewer", shadow("tickets", "ticket_id", "customer_id", {
        "kind": "case", "whens": [{"when": op("=", col("customer_id"), lit(17)), "then": lit(1)}], "else": lit(0)})),
    ("order_by_alias", "support", "viewer", shadow("agents", "agent_id", "name", op("like", col("name"), lit("A%")))),
    ("order_by_alias", "support", "analyst", shadow("ticket_messages", "message_id", "body",
                                                    op("like", col("body"), lit("%refund%")))),
    ("order_by_alias", "webanalytics", "viewer", shadow("sessions", "session_id", "customer_id",
                                                        op("=", col("customer_id"), lit(17)))),
    ("order_by_alias", "webanalytics", "viewer", shadow("conversions", "conversion_id", "customer_id",
                                                        {"kind": "unary", "op": "is_null", "arg": col("customer_id")})),
    ("group_by_alias", "support", "viewer", {"select": [{"expr": COUNT, "alias": "customer_id"}],
                                             "from": {"name": "tickets"}, "group_by": [col("customer_id")]}),
    ("group_by_alias", "support", "analyst", {"select": [{"expr": COUNT, "alias": "body"}],
                                              "from": {"name": "ticket_messages"}, "group_by": [col("body")]}),
    ("having_alias", "support", "viewer", {"select": [{"expr": col("status")}, {"expr": COUNT, "alias": "customer_id"}],
                                           "from": {"name": "tickets"}, "group_by": [col("status")],
                                           "having": op(">", col("customer_id"), lit(3))}),
    ("having_alias", "support", "analyst", {"select": [{"expr": col("sender")},
                                                       {"expr": fn("max", col("message_id")), "alias": "body"}],
                                            "from": {"name": "ticket_messages"}, "group_by": [col("sender")],
                                            "having": op("like", col("body"), lit("%a%"))}),
    ("subquery", "support", "viewer", {"select": [{"expr": col("status")}], "from": {"name": "tickets", "alias": "t"},
                                       "where": op("=", col("ticket_id", "t"), {"kind": "scalar_subquery", "plan":
                                           shadow("tickets", "ticket_id", "customer_id",
                                                  op("=", col("customer_id"), lit(17)), limit=1)})}),
    ("subquery", "support", "viewer", {"select": [{"expr": col("ticket_id", "t")}], "from": {"name": "tickets", "alias": "t"},
                                       "where": {"kind": "exists", "plan": {
                                           "select": [{"expr": lit(1)}], "from": {"name": "tickets", "alias": "u"},
                                           "where": op("and", op("=", col("ticket_id", "u"), col("ticket_id", "t")),
                                                       op("=", col("customer_id", "u"), lit(17)))}}}),
    ("subquery", "chinook", "analyst", {"select": [{"expr": col("FirstName")}], "from": {"name": "Customer"},
                                        "where": {"kind": "in_subquery", "arg": col("SupportRepId"), "plan": {
                                            "select": [{"expr": col("EmployeeId")}], "from": {"name": "Employee"},
                                            "where": op("<", col("BirthDate"), lit("1960-01-01"))}}}),
    ("subquery", "chinook", "viewer", {"select": [{"expr": col("Name")}], "from": {"name": "Genre"},
                                       "where": {"kind": "exists", "plan": {
                                           "select": [{"expr": lit(1)}], "from": {"name": "Customer"},
                                           "where": op("like", col("Email"), lit("a%"))}}}),
    ("quoted_names", "chinook", "viewer", {"select": [{"expr": col("EMAIL")}], "from": {"name": "customer"}}),
    ("quoted_names", "chinook", "analyst", {"select": [{"expr": col("BIRTHDATE", "E")}],
                                            "from": {"name": "EMPLOYEE", "alias": "e"}}),
    ("quoted_names", "support", "viewer", {"select": [{"expr": col("Customer_ID", "TICKETS")}],
                                           "from": {"name": "Tickets"}}),
    ("quoted_names", "support", "analyst", {"select": [{"expr": col("Body")}], "from": {"name": "TICKET_MESSAGES"}}),
]  # fmt: skip

ATTACK_COUNTS = Counter(c for c, *_ in (*SQL_ATTACKS, *DANGEROUS, *PLAN_ATTACKS))


def _sql_ids(rows: list[tuple[str, str, str, str]]) -> list[str]:
    return [f"{c}-{ds}-{role}-{i}" for i, (c, ds, role, _) in enumerate(rows)]


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, demo_template: Path) -> Path:
    import shutil

    target = tmp_path_factory.mktemp("attacks") / "demo"
    shutil.copytree(demo_template, target)
    return target


@pytest.fixture(scope="module")
def config(project: Path) -> ProjectConfig:
    return load_config(project / "nl2sql.yaml")


@pytest.fixture(scope="module")
def registry(config: ProjectConfig) -> Iterator[DatasourceRegistry]:
    with DatasourceRegistry(config) as reg:
        yield reg


@pytest.fixture
def executed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every SQL the engine hands to its executor."""
    seen: list[str] = []
    real = pipeline.execute

    def spy(adapter: Any, datasource_id: str, sql: str, **kw: Any) -> Any:
        seen.append(sql)
        return real(adapter, datasource_id, sql, **kw)

    monkeypatch.setattr(pipeline, "execute", spy)
    return seen


def _case(case_id: str, ds: str, role: str, plan: dict | None) -> EvalCase:
    return EvalCase.model_validate({
        "id": case_id, "question": f"attack {case_id}", "datasources": [ds], "status": "approved",
        # Without a plan the gold resolver answers "unanswerable": a curated refusal ends there.
        "outcome": {role: "refused" if plan else "unanswerable"}, "sql": "-- attack" if plan else None,
        "plan": plan,
    })


def _engine(config: ProjectConfig, registry: DatasourceRegistry, server: GoldLLMServer, bus: EventBus,
            curated: list[dict] | None = None) -> Engine:
    if curated:
        config = config.model_copy(update={"curated": [CuratedAnswer.model_validate(c) for c in curated]})
    return Engine(config, registry=registry, bus=bus, llm=server.llm_config(),
                  options=RuntimeOptions(plan_cache=False, refusal_names_tables=False, curated=bool(curated)))


# ---------------------------------------------------------------- straight through the check


@pytest.mark.parametrize(("cls", "ds", "role", "sql"), SQL_ATTACKS, ids=_sql_ids(SQL_ATTACKS))
def test_the_policy_refuses_every_sql_attack(cls: str, ds: str, role: str, sql: str, config: ProjectConfig,
                                             registry: DatasourceRegistry) -> None:
    decision = check_sql(sql, dialect=registry.get(ds).dialect, schema=registry.snapshot(ds),
                         access=config.policies.role(role).access(ds), role=role)
    assert not decision.allowed, f"{cls}: {sql} was allowed for {role}"
    assert decision.message == GENERIC_REFUSAL
    if cls == "system_catalog":
        assert decision.rule == "system_catalog"


@pytest.mark.parametrize(("cls", "ds", "role", "sql"), DANGEROUS, ids=_sql_ids(DANGEROUS))
def test_dangerous_functions_are_refused_by_the_check_or_the_engine(cls: str, ds: str, role: str, sql: str,
                                                                    config: ProjectConfig,
                                                                    registry: DatasourceRegistry) -> None:
    adapter = registry.get(ds)
    decision = check_sql(sql, dialect=adapter.dialect, schema=registry.snapshot(ds),
                         access=config.policies.role(role).access(ds), role=role)
    if decision.allowed:
        with pytest.raises(DatasourceError):
            adapter.execute(sql)
    assert not Path("/tmp/nl2sql-pwned").exists()


# ---------------------------------------------------------------- as curated answers


@pytest.mark.parametrize(("cls", "ds", "role", "sql"), SQL_ATTACKS + DANGEROUS, ids=_sql_ids(SQL_ATTACKS + DANGEROUS))
def test_a_curated_attack_is_never_served(cls: str, ds: str, role: str, sql: str, config: ProjectConfig,
                                          registry: DatasourceRegistry, executed: list[str]) -> None:
    case = _case("curated", ds, role, None)
    bus = EventBus()
    with GoldLLMServer([case], bus) as server:
        engine = _engine(config, registry, server, bus, curated=[{"question": case.question, "sql": sql,
                                                                  "datasource": ds}])
        result = engine.ask(case.question, role, context={"case_id": case.id})
    assert result.source == "generated" or result.status == "error", f"{cls}: curated {sql} served to {role}"
    assert result.result_sets == [] and result.rows is None
    if cls != "dangerous_function":
        assert sql not in executed


# ---------------------------------------------------------------- as plans


@pytest.mark.parametrize(("cls", "ds", "role", "plan"), PLAN_ATTACKS,
                         ids=[f"{c}-{ds}-{r}-{i}" for i, (c, ds, r, _) in enumerate(PLAN_ATTACKS)])
def test_a_plan_attack_is_refused_before_anything_runs(cls: str, ds: str, role: str, plan: dict,
                                                       config: ProjectConfig, registry: DatasourceRegistry,
                                                       executed: list[str]) -> None:
    case = _case("plan", ds, role, plan)
    bus = EventBus()
    with GoldLLMServer([case], bus) as server:
        result = _engine(config, registry, server, bus).ask(case.question, role, context={"case_id": case.id})
    assert (result.status, result.error_code) == ("error", SECURITY_VIOLATION), (cls, result.error_message)
    assert result.error_message == GENERIC_REFUSAL
    assert result.result_sets == [] and result.sql is None and executed == []


# ---------------------------------------------------------------- as seed drafts


class _DraftServer(GoldLLMServer):
    """Serves one call's worth of hostile drafts (the gold server answers only runs it knows)."""

    ANCHOR = EvalCase(id="anchor", question="anchor", datasources=["chinook"], status="draft",
                      outcome={"admin": "allowed"})

    def __init__(self, drafts: list[dict[str, Any]]) -> None:
        counter = itertools.count()
        super().__init__([self.ANCHOR], EventBus(), usage={"prompt_tokens": 10, "completion_tokens": 10},
                         answers={"SeedDrafts": lambda case, role, server: {"cases": drafts if next(counter) == 0
                                                                           else []}})

    def answer(self, body: dict[str, Any], run_id: str | None) -> dict[str, Any]:
        if run_id:
            self.bus.publish(Event(RUN_STARTED, run_id, {"question": "anchor", "context": {"case_id": "anchor"}}))
        return super().answer(body, run_id)


SEED_GROUPS = sorted({(ds, role) for _, ds, role, _ in (*SQL_ATTACKS, *DANGEROUS)})


@pytest.mark.parametrize(("ds", "role"), SEED_GROUPS, ids=[f"{ds}-{role}" for ds, role in SEED_GROUPS])
def test_hostile_seed_drafts_are_dropped(ds: str, role: str, project: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    attacks = [(c, sql) for c, d, r, sql in (*SQL_ATTACKS, *DANGEROUS) if (d, r) == (ds, role)]
    drafts = [{"question": f"draft {i}", "sql": sql, "tables": []} for i, (_, sql) in enumerate(attacks)]
    with _DraftServer(drafts) as server:
        section = server.llm_config().model_dump(mode="json", exclude_none=True)
        section["prices"] = {"gold-plans": {"input": 1.0, "output": 1.0}}
        data = yaml.safe_load((project / "nl2sql.yaml").read_text(encoding="utf-8"))
        data["llm"] = LLMConfig.model_validate(section).model_dump(mode="json", exclude_none=True)
        path = tmp_path / "nl2sql.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        (tmp_path / "evals.yaml").write_text((project / "evals.yaml").read_text(encoding="utf-8"), encoding="utf-8")
        for name in ("data", "suites"):
            (tmp_path / name).symlink_to(project / name)
        config = load_config(path)
        with DatasourceRegistry(config) as registry:
            report = seed(config, ds, count=len(drafts), out=tmp_path / "drafts.yaml", role=role,
                          max_cost_usd=1.0, registry=registry)
    kept = [d for d in drafts if d["question"] not in {x.question for x in report.dropped}]
    assert report.drafted == 0 and kept == [], f"kept for {role}: {[d['sql'] for d in kept]}"
    for (cls, _), dropped in zip(attacks, report.dropped, strict=True):
        assert dropped.reason.startswith("policy ") or cls == "dangerous_function", dropped
    assert not (tmp_path / "drafts.yaml").exists()


# ---------------------------------------------------------------- the multi-domain probes, hand-worked elsewhere

SCOPE = {"table_scope", "column_scope"}


def test_the_multidomain_probes_and_controls_agree_with_the_check(config: ProjectConfig,
                                                                   registry: DatasourceRegistry) -> None:
    """Each probe of suites/multidomain.yaml is refused by the rule it names (a shadowing probe by a
    scope rule), each allow control is allowed and runs, and each follow-up case's final SQL is
    decided as its author worked it out by hand."""
    from nl2sql_assets.evaluation.suites import load_suite
    from nl2sql_assets.paths import packaged_suites_dir

    cases = load_suite(packaged_suites_dir() / "multidomain.yaml").cases
    probes = [c for c in cases if c.kind == "probe"]
    follow_ups = [c for c in cases if c.turns]
    assert len(follow_ups) == 12
    judged = 0

    def decide(sql: str, role: str, ds: str) -> Any:
        adapter = registry.get(ds)
        return check_sql(sql, dialect=adapter.dialect, schema=registry.snapshot(ds), role=role,
                         access=config.policies.role(role).access(ds),
                         dangerous_functions=config.policies.dangerous_for(adapter.dialect))

    for probe in probes:
        ds = probe.datasources[0]
        assert probe.sql is not None
        for role, outcome in probe.outcome.items():
            decision = decide(probe.sql, role, ds)
            judged += 1
            if outcome == "allowed":
                assert decision.allowed, (probe.id, decision.detail)
                assert registry.get(ds).execute(probe.sql).rows, probe.id
                continue
            assert decision.rule == probe.rule, (probe.id, decision.rule, decision.detail)
            if "cte-shadowing" in probe.tags or "alias-shadowing" in probe.tags:
                assert decision.rule in SCOPE, probe.id
            if probe.rule == "dangerous_function":  # the engine holds on its own too
                with pytest.raises(DatasourceError):
                    registry.get(ds).execute(probe.sql)
    for follow_up in follow_ups:
        assert follow_up.sql is not None
        for role, outcome in follow_up.outcome.items():
            judged += 1
            assert decide(follow_up.sql, role, follow_up.datasources[0]).allowed is (outcome == "allowed"), (
                follow_up.id, role)
    assert judged >= 50
