"""The final-SQL policy check: one small table of hand-worked cases per rule.

Schemas and policies are written out here (a support desk on DuckDB, a music store on SQLite),
so each row can be checked by reading it: the SQL, who asks, and the rule that must fire
(None: allowed). The attack suites over the real demo databases are in
tests/integration/test_attacks.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from nl2sql_assets.config import DatasourceAccess
from nl2sql_assets.datasources.schema import ColumnInfo, SchemaSnapshot, TableInfo
from nl2sql_assets.policy import (
    GENERIC_REFUSAL,
    RULES,
    Finding,
    PolicyContext,
    PolicyRule,
    QueryFacts,
    analyse,
    check_sql,
)


def _schema(ds: str, engine: str, tables: dict[str, list[str]]) -> SchemaSnapshot:
    return SchemaSnapshot(datasource_id=ds, engine=engine, tables=[
        TableInfo(name=t, columns=[ColumnInfo(name=c, type="TEXT") for c in cols]) for t, cols in tables.items()
    ])


SUPPORT = _schema("support", "duckdb", {
    "tickets": ["ticket_id", "customer_id", "agent_id", "status"],
    "agents": ["agent_id", "name", "team"],
    "ticket_messages": ["message_id", "ticket_id", "body"],
})
STORE = _schema("store", "sqlite", {
    "Customer": ["CustomerId", "FirstName", "Email", "Country"],
    "Employee": ["EmployeeId", "FirstName", "BirthDate"],
    "Genre": ["GenreId", "Name"],
    "Track": ["TrackId", "Name", "GenreId"],
})
ACCESS: dict[tuple[str, str], DatasourceAccess | None] = {
    ("support", "viewer"): DatasourceAccess(allow=["tickets", "agents.agent_id", "agents.team"],
                                            deny=["tickets.customer_id"]),
    ("support", "analyst"): DatasourceAccess(allow=["*"], deny=["ticket_messages.body"]),
    ("support", "admin"): DatasourceAccess(allow=["*"]),
    ("support", "open"): None,
    ("store", "viewer"): DatasourceAccess(allow=["Genre", "Track"]),
    ("store", "analyst"): DatasourceAccess(allow=["*"], deny=["Employee"]),
    ("store", "nomail"): DatasourceAccess(allow=["*"], deny=["Customer.Email"]),
    ("store", "admin"): DatasourceAccess(allow=["*"]),
}


def decide(ds: str, role: str, sql: str) -> Any:
    schema = SUPPORT if ds == "support" else STORE
    dialect = "duckdb" if ds == "support" else "sqlite"
    return check_sql(sql, dialect=dialect, schema=schema, access=ACCESS[(ds, role)], role=role)


def _ids(rows: list[tuple]) -> list[str]:
    return [f"{r[0]}-{r[1]}-{r[2][:48]}" for r in rows]


# ---------------------------------------------------------------- read_only

READ_ONLY = [
    ("support", "admin", "SELECT 1 FROM", "read_only"),
    ("support", "admin", "SELECT 1; SELECT 2", "read_only"),
    ("store", "admin", "DELETE FROM Genre", "read_only"),
    ("store", "admin", "", "read_only"),
    ("store", "admin", "SELECT Name FROM Genre;", None),
]


@pytest.mark.parametrize(("ds", "role", "sql", "rule"), READ_ONLY, ids=_ids(READ_ONLY))
def test_read_only_query(ds: str, role: str, sql: str, rule: str | None) -> None:
    assert decide(ds, role, sql).rule == rule


# ---------------------------------------------------------------- system_catalog: denied to every role

SYSTEM_CATALOG = [
    ("store", "admin", "SELECT name FROM sqlite_master"),
    ("store", "admin", "SELECT sql FROM sqlite_schema WHERE name = 'Employee'"),
    ("store", "admin", "SELECT name FROM SQLITE_TEMP_MASTER"),
    ("store", "admin", 'SELECT name FROM "sqlite_master"'),
    ("store", "admin", "SELECT name FROM main.sqlite_master"),
    ("store", "admin", "SELECT * FROM pragma_table_info('Employee')"),
    ("store", "analyst", "SELECT Name FROM Genre WHERE EXISTS (SELECT 1 FROM sqlite_master)"),
    ("store", "analyst", "WITH t AS (SELECT name FROM sqlite_master) SELECT * FROM t"),
    ("support", "admin", "SELECT * FROM duckdb_tables()"),
    ("support", "admin", "SELECT column_name FROM duckdb_columns() WHERE table_name = 'tickets'"),
    ("support", "admin", "SELECT * FROM information_schema.columns"),
    ("support", "admin", "SELECT * FROM pg_catalog.pg_class"),
    ("support", "admin", "SELECT current_setting('threads')"),
    ("support", "open", "SELECT * FROM duckdb_settings()"),
    ("support", "viewer", "SELECT ticket_id FROM tickets UNION ALL SELECT 1 FROM information_schema.tables"),
]


@pytest.mark.parametrize(("ds", "role", "sql"), SYSTEM_CATALOG, ids=_ids(SYSTEM_CATALOG))
def test_system_catalog_is_denied_to_every_role(ds: str, role: str, sql: str) -> None:
    decision = decide(ds, role, sql)
    assert (decision.allowed, decision.rule, decision.message) == (False, "system_catalog", GENERIC_REFUSAL)


# ---------------------------------------------------------------- known_sources

KNOWN_SOURCES = [
    ("support", "admin", "SELECT * FROM query_table('tickets')", "known_sources"),
    ("support", "admin", "SELECT * FROM query('SELECT customer_id FROM tickets')", "known_sources"),
    ("support", "admin", "SELECT * FROM read_csv('/etc/passwd')", "dangerous_function"),  # listed for duckdb
    ("support", "admin", "SELECT * FROM range(3)", "known_sources"),
    ("support", "admin", "SELECT * FROM other_db.main.tickets", "known_sources"),
    ("support", "admin", "SELECT * FROM nowhere", "known_sources"),
    ("store", "admin", "SELECT * FROM json_each('[1]')", "known_sources"),
    ("store", "admin", "SELECT Name FROM main.Genre", None),
    ("store", "admin", "WITH g AS (SELECT Name FROM Genre) SELECT Name FROM g", None),
    ("store", "admin", "SELECT x.Name FROM (SELECT Name FROM Genre) AS x", None),
]


@pytest.mark.parametrize(("ds", "role", "sql", "rule"), KNOWN_SOURCES, ids=_ids(KNOWN_SOURCES))
def test_known_sources(ds: str, role: str, sql: str, rule: str | None) -> None:
    assert decide(ds, role, sql).rule == rule


# ---------------------------------------------------------------- resolved_names: fail closed

RESOLVED_NAMES = [
    ("store", "admin", "SELECT Colour FROM Genre", "resolved_names"),
    ("store", "admin", "SELECT GenreId FROM Genre JOIN Track ON 1 = 1", "resolved_names"),  # ambiguous
    ("support", "admin", "SELECT COLUMNS('cust.*') FROM tickets", "resolved_names"),
    ("support", "admin", "SELECT * LIKE 'cust%' FROM tickets", "resolved_names"),
    ("support", "admin", "SELECT #2 FROM tickets", "resolved_names"),
    ("store", "admin", "SELECT g.Name AS n FROM Genre g ORDER BY n", None),
    ("store", "admin", "SELECT Name FROM Genre UNION SELECT Name FROM Track ORDER BY Name", None),
]


@pytest.mark.parametrize(("ds", "role", "sql", "rule"), RESOLVED_NAMES, ids=_ids(RESOLVED_NAMES))
def test_resolved_names(ds: str, role: str, sql: str, rule: str | None) -> None:
    assert decide(ds, role, sql).rule == rule


# ---------------------------------------------------------------- names as the database resolves them

# SQLite reads a double-quoted token that names no column it can see as a string; one that names
# a column is that column, however it is quoted and through whatever alias, join or scope.
NAMES_AS_SQLITE_READS = [
    # (role, sql, rule, the columns read)
    ("admin", 'SELECT Name FROM Genre WHERE Name = "Rock"', None, ["Genre.Name"]),
    ("admin", 'SELECT Name FROM Genre WHERE Name IN ("Rock", "Jazz") ORDER BY "x"', None, ["Genre.Name"]),
    ("admin", 'SELECT "hello", count(*) FROM Genre', None, []),
    ("admin", 'SELECT T1.Name FROM Genre AS T1 JOIN Track AS T2 ON T1.GenreId = T2.GenreId WHERE T2.Name = "Sun"',
     None, ["Genre.GenreId", "Genre.Name", "Track.GenreId", "Track.Name"]),
    ("admin", 'SELECT Email AS mail FROM Customer WHERE "mail" = \'a\'', None, ["Customer.Email"]),
    ("nomail", 'SELECT "Email" FROM Customer', "column_scope", None),
    ("nomail", 'SELECT "EMAIL" FROM "customer"', "column_scope", None),
    ("nomail", 'SELECT FirstName FROM Customer WHERE Country = "Email"', "column_scope", None),
    ("nomail", 'SELECT "e" FROM (SELECT Email AS e FROM Customer)', "column_scope", None),
    ("nomail", 'SELECT x."e" FROM (SELECT Email AS e FROM Customer) AS x', "column_scope", None),
    ("nomail", 'WITH c AS (SELECT Email FROM Customer) SELECT "Email" FROM c', "column_scope", None),
    ("nomail", 'WITH c AS (SELECT * FROM Customer) SELECT "Email" FROM c', "column_scope", None),
    ("nomail", 'SELECT t.Name FROM Track t JOIN Customer c ON "Email" = t.Name', "column_scope", None),
    ("nomail", 'SELECT Name FROM Genre WHERE EXISTS (SELECT 1 FROM Customer WHERE "Email" = \'x\')',
     "column_scope", None),
    # correlated: the name is the outer query's column
    ("nomail", 'SELECT FirstName FROM Customer WHERE EXISTS (SELECT 1 FROM Genre WHERE Name = "Email")',
     "column_scope", None),
    ("nomail", 'SELECT FirstName FROM Customer WHERE CustomerId IN (SELECT GenreId FROM Genre GROUP BY "Email")',
     "column_scope", None),
    # a string where the column would only be a table the token cannot see
    ("nomail", 'SELECT Name FROM Genre WHERE Name = "Email"', None, ["Genre.Name"]),
    # brackets and backticks are never strings; a qualified name never is
    ("admin", "SELECT [Rock] FROM Genre", "resolved_names", None),
    ("admin", "SELECT `Rock` FROM Genre", "resolved_names", None),
    ("admin", 'SELECT g."Rock" FROM Genre g', "resolved_names", None),
    # rowid: the INTEGER PRIMARY KEY where there is one, else the table's own row id
    ("admin", "SELECT rowid, oid, _rowid_ FROM Genre", None, ["Genre.rowid"]),
    ("admin", "SELECT g.rowid FROM Genre g JOIN Track t ON t.GenreId = g.GenreId", None,
     ["Genre.GenreId", "Genre.rowid", "Track.GenreId"]),
    ("admin", "SELECT rowid FROM Genre, Track", "resolved_names", None),  # SQLite: no such column
    ("admin", "SELECT rowid FROM Keyed", None, ["Keyed.KeyedId"]),
    ("columns", "SELECT rowid FROM Keyed", "column_scope", None),
    ("columns", "SELECT rowid FROM Genre", "column_scope", None),
    ("columns", "SELECT Name FROM Genre", None, ["Genre.Name"]),
]

KEYED = _schema("store", "sqlite", {t.name: [c.name for c in t.columns] for t in STORE.tables})
KEYED = KEYED.model_copy(update={"tables": [*KEYED.tables, TableInfo(
    name="Keyed", columns=[ColumnInfo(name="KeyedId", type="INTEGER", primary_key=True),
                           ColumnInfo(name="Label", type="TEXT")], primary_key=["KeyedId"])]})
KEYED_ACCESS = {"admin": DatasourceAccess(allow=["*"]), "nomail": ACCESS[("store", "nomail")],
                "columns": DatasourceAccess(allow=["Genre.Name", "Genre.GenreId", "Keyed.Label"])}


@pytest.mark.parametrize(("role", "sql", "rule", "columns"), NAMES_AS_SQLITE_READS,
                         ids=[f"{r[0]}-{r[1][:56]}" for r in NAMES_AS_SQLITE_READS])
def test_names_resolve_as_sqlite_resolves_them(role: str, sql: str, rule: str | None, columns: list[str] | None
                                                ) -> None:
    decision = check_sql(sql, dialect="sqlite", schema=KEYED, access=KEYED_ACCESS[role], role=role)
    assert decision.rule == rule, decision.detail
    if columns is not None:
        assert decision.columns == columns


DUCKDB_NAMES = [
    ('SELECT name FROM agents WHERE team = "Billing"', "resolved_names"),  # DuckDB has no string fallback
    ("SELECT rowid FROM agents", None),
    ('SELECT "NAME" FROM "Agents"', None),
]


@pytest.mark.parametrize(("sql", "rule"), DUCKDB_NAMES, ids=[r[0][:60] for r in DUCKDB_NAMES])
def test_names_resolve_as_duckdb_resolves_them(sql: str, rule: str | None) -> None:
    assert decide("support", "admin", sql).rule == rule


# Whose fault a refusal is: the policy's (the role may not read it, or the check cannot tell what
# is read), or the SQL's own (it does not run: an unknown or ambiguous name, a missing table).
FAULTS = [
    ("store", "admin", "SELECT Colour FROM Genre", "resolved_names", "sql", "no such column: Colour"),
    ("store", "admin", "SELECT GenreId FROM Genre JOIN Track ON 1 = 1", "resolved_names", "sql",
     "ambiguous column name: GenreId"),
    ("store", "admin", "SELECT g.Colour FROM Genre AS g", "resolved_names", "sql", "no such column: g.Colour"),
    ("store", "admin", "SELECT Name FROM Genres", "known_sources", "sql", "Genres"),
    ("store", "admin", "SELECT Name FROM Genre WHERE", "read_only", "sql", "incomplete input"),
    ("store", "admin", "SELECT Name FROM Genre WHERE Name = 'a' ORDER Name", "read_only", "sql", "syntax error"),
    ("store", "nomail", "SELECT Email FROM Customer", "column_scope", "policy", "Customer.Email"),
    ("store", "admin", "SELECT * FROM json_each('[1]')", "known_sources", "policy", "json_each()"),
    ("store", "admin", "DELETE FROM Genre", "read_only", "policy", "not a query"),
    ("support", "admin", "SELECT colour FROM agents", "resolved_names", "sql", '"colour"'),
    ("support", "admin", "SELECT agent_id FROM agents JOIN tickets ON true", "resolved_names", "sql", "agent_id"),
    ("support", "admin", "SELECT COLUMNS('cust.*') FROM tickets", "resolved_names", "policy", "COLUMNS"),
]


@pytest.mark.parametrize(("ds", "role", "sql", "rule", "fault", "named"), FAULTS, ids=_ids(FAULTS))
def test_a_refusal_says_whose_fault_it_is_and_names_the_bad_name(ds: str, role: str, sql: str, rule: str,
                                                                  fault: str, named: str) -> None:
    decision = decide(ds, role, sql)
    assert (decision.allowed, decision.rule, decision.fault) == (False, rule, fault), decision.detail
    assert named in (decision.detail or "")


# ---------------------------------------------------------------- table_scope

TABLE_SCOPE = [
    ("store", "viewer", "SELECT Name FROM Genre", None),
    ("store", "viewer", "SELECT COUNT(*) FROM Customer", "table_scope"),
    ("store", "viewer", 'SELECT "EMAIL" FROM "customer"', "table_scope"),
    ("store", "viewer", "SELECT [Email] FROM [CUSTOMER]", "table_scope"),
    ("store", "analyst", "SELECT BirthDate FROM main.Employee", "table_scope"),
    ("store", "analyst", "WITH Customer AS (SELECT FirstName, BirthDate FROM Employee) SELECT * FROM Customer",
     "table_scope"),
    ("store", "analyst", "SELECT CustomerId FROM Customer UNION SELECT EmployeeId FROM Employee", "table_scope"),
    ("store", "analyst", "SELECT Email, (SELECT MAX(BirthDate) FROM Employee) FROM Customer", "table_scope"),
    ("store", "analyst", "SELECT Email FROM Customer c WHERE EXISTS "
                         "(SELECT 1 FROM Employee e WHERE e.FirstName = c.FirstName)", "table_scope"),
    # A CTE named after a denied table is the CTE: it reads Customer, which the analyst may read.
    ("store", "analyst", "WITH Employee AS (SELECT FirstName FROM Customer) SELECT FirstName FROM Employee", None),
    ("support", "viewer", "SELECT COUNT(*) FROM tickets", None),
    ("support", "viewer", "SELECT COUNT(*) FROM ticket_messages", "table_scope"),
    ("support", "open", "SELECT body FROM ticket_messages", None),  # no roles defined: no RBAC
]


@pytest.mark.parametrize(("ds", "role", "sql", "rule"), TABLE_SCOPE, ids=_ids(TABLE_SCOPE))
def test_table_scope(ds: str, role: str, sql: str, rule: str | None) -> None:
    assert decide(ds, role, sql).rule == rule


# ---------------------------------------------------------------- column_scope, every clause and scope

COLUMN_SCOPE = [
    # ORDER BY: a bare key is the alias; inside an expression SQLite and DuckDB read the column.
    ("support", "viewer", "SELECT ticket_id AS customer_id FROM tickets ORDER BY customer_id", None),
    ("support", "viewer", "SELECT ticket_id AS customer_id FROM tickets ORDER BY (customer_id)", None),
    ("support", "viewer", "SELECT ticket_id AS customer_id FROM tickets ORDER BY (customer_id = 17) DESC",
     "column_scope"),
    ("support", "viewer", "SELECT ticket_id AS customer_id FROM tickets ORDER BY -customer_id", "column_scope"),
    ("support", "viewer", "SELECT agent_id AS name FROM agents ORDER BY upper(name)", "column_scope"),
    ("support", "viewer", "SELECT agent_id AS name FROM agents ORDER BY name", None),
    # GROUP BY, HAVING, windows, QUALIFY
    ("support", "viewer", "SELECT COUNT(*) AS customer_id FROM tickets GROUP BY customer_id", "column_scope"),
    ("support", "viewer", "SELECT status FROM tickets GROUP BY status HAVING MAX(customer_id) > 3", "column_scope"),
    ("support", "viewer", "SELECT ticket_id AS customer_id FROM tickets GROUP BY ticket_id HAVING customer_id = 17",
     "column_scope"),
    ("support", "viewer", "SELECT ticket_id, ROW_NUMBER() OVER (ORDER BY customer_id) FROM tickets",
     "column_scope"),
    ("support", "viewer", "SELECT ticket_id AS customer_id, COUNT(*) OVER (PARTITION BY customer_id) FROM tickets",
     "column_scope"),
    ("support", "viewer", "SELECT ticket_id FROM tickets QUALIFY customer_id = 17", "column_scope"),
    ("support", "viewer", "SELECT status, COUNT(*) AS n FROM tickets GROUP BY status ORDER BY n DESC", None),
    # WHERE, JOIN ... ON, sub-queries (correlated too), set operations, CTEs
    ("support", "viewer", "SELECT ticket_id FROM tickets WHERE customer_id = 17", "column_scope"),
    ("support", "viewer", "SELECT t.ticket_id FROM tickets t JOIN agents a ON a.name = 'Ann'", "column_scope"),
    ("support", "viewer", "SELECT t.ticket_id FROM tickets t WHERE EXISTS "
                          "(SELECT 1 FROM tickets u WHERE u.ticket_id = t.ticket_id AND u.customer_id = 17)",
     "column_scope"),
    ("support", "viewer", "SELECT ticket_id FROM tickets UNION SELECT customer_id FROM tickets", "column_scope"),
    ("support", "viewer", "WITH agents AS (SELECT ticket_id AS agent_id, customer_id AS team FROM tickets) "
                          "SELECT agent_id, team FROM agents", "column_scope"),
    ("support", "viewer", "WITH x AS (SELECT agent_id AS a, team FROM agents) SELECT a, team FROM x", None),
    ("support", "viewer", "SELECT list_transform([1], x -> x + customer_id) FROM tickets", "column_scope"),
    ("support", "viewer", "SELECT list_transform([1], x -> x + 1) FROM tickets", None),
    # stars and whole rows
    ("support", "viewer", "SELECT * FROM tickets", "column_scope"),
    ("support", "viewer", "SELECT t.* FROM tickets t", "column_scope"),
    ("support", "viewer", "SELECT * EXCLUDE (customer_id) FROM tickets", None),
    ("support", "viewer", "SELECT t FROM tickets t", "column_scope"),
    ("support", "viewer", "SELECT to_json(t) FROM tickets t", "column_scope"),
    # quoted and case-variant names
    ("support", "viewer", 'SELECT "CUSTOMER_ID" FROM "Tickets"', "column_scope"),
    ("support", "analyst", 'SELECT m."Body" FROM ticket_messages AS m', "column_scope"),
    ("support", "analyst", "SELECT message_id AS body FROM ticket_messages ORDER BY (body LIKE '%refund%') DESC",
     "column_scope"),
    ("support", "analyst", "SELECT COUNT(*) FROM ticket_messages", None),
    ("store", "nomail", "SELECT CustomerId AS Email FROM Customer ORDER BY Email", None),
    ("store", "nomail", "SELECT CustomerId AS Email FROM Customer ORDER BY Email LIKE '%@gmail.com'",
     "column_scope"),
    ("store", "nomail", "SELECT Country, COUNT(*) FROM Customer GROUP BY Country HAVING MIN(email) > 'a'",
     "column_scope"),
]


@pytest.mark.parametrize(("ds", "role", "sql", "rule"), COLUMN_SCOPE, ids=_ids(COLUMN_SCOPE))
def test_column_scope(ds: str, role: str, sql: str, rule: str | None) -> None:
    decision = decide(ds, role, sql)
    assert decision.rule == rule, decision.detail
    assert decision.allowed is (rule is None)


# ---------------------------------------------------------------- what is read, and the decision's shape


def test_the_decision_lists_what_is_read_by_schema_names() -> None:
    decision = decide("store", "analyst", 'SELECT g."NAME", COUNT(*) AS n FROM genre g JOIN "TRACK" t '
                                          "ON t.genreid = g.GenreId GROUP BY g.name")
    assert decision.allowed and decision.rule is None and decision.message is None and decision.fault is None
    assert decision.tables == ["Genre", "Track"]
    assert decision.columns == ["Genre.GenreId", "Genre.Name", "Track.GenreId"]


def test_a_refusal_is_generic_unless_names_are_asked_for() -> None:
    decision = decide("store", "analyst", "SELECT BirthDate FROM Employee")
    assert decision.message == GENERIC_REFUSAL and decision.refusal() == GENERIC_REFUSAL
    assert "Employee" not in decision.refusal() and "Employee" in decision.refusal(names_tables=True)
    assert "Employee" in (decision.detail or "")


def test_the_facts_are_computed_once_per_statement_and_schema() -> None:
    first = analyse("SELECT Name FROM Genre", "sqlite", STORE)
    assert analyse("SELECT Name FROM Genre", "sqlite", STORE) is first
    other = _schema("store", "sqlite", {"Genre": ["GenreId"]})
    assert analyse("SELECT Name FROM Genre", "sqlite", other).unresolved  # another schema, another answer


def test_a_rule_is_one_class_and_one_registry_entry() -> None:
    class NoGenre(PolicyRule):
        name = "no_genre"
        checks = "never reads Genre"

        def check(self, facts: QueryFacts, ctx: PolicyContext) -> Finding | None:
            return Finding("reads Genre", denied=("Genre",)) if "Genre" in facts.tables else None

    rules = (*RULES, NoGenre())
    decision = check_sql("SELECT Name FROM Genre", dialect="sqlite", schema=STORE, access=None, role="admin",
                         rules=rules)
    assert (decision.allowed, decision.rule, decision.denied) == (False, "no_genre", ["Genre"])
    assert all(r.name and r.checks for r in RULES)
    assert len({r.name for r in RULES}) == len(RULES)


# ---------------------------------------------------------------- dangerous_function: denied to every role

DANGEROUS = [
    ("store", "admin", "SELECT load_extension('/tmp/x.so') AS x", "dangerous_function"),
    ("store", "admin", "SELECT Name, readfile('/etc/passwd') AS f FROM Genre", "dangerous_function"),
    ("store", "open_store", "SELECT writefile('/tmp/x', Name) FROM Genre", "dangerous_function"),
    ("store", "admin", "SELECT Name FROM Genre WHERE GenreId IN (SELECT length(readfile('x')))", "dangerous_function"),
    ("store", "admin", "SELECT upper(Name) AS n FROM Genre", None),
    ("support", "admin", "SELECT * FROM read_csv_auto('/etc/passwd')", "dangerous_function"),
    ("support", "admin", "SELECT content FROM read_text('/etc/hostname')", "dangerous_function"),
    ("support", "open", "SELECT * FROM glob('/home/*')", "dangerous_function"),
    ("support", "admin", "SELECT * FROM read_parquet('s3://bucket/x.parquet')", "dangerous_function"),
    ("support", "admin", "SELECT status, count(*) AS n FROM tickets GROUP BY status", None),
]


@pytest.mark.parametrize(("ds", "role", "sql", "rule"), DANGEROUS, ids=_ids(DANGEROUS))
def test_dangerous_function(ds: str, role: str, sql: str, rule: str | None) -> None:
    if role == "open_store":
        decision = check_sql(sql, dialect="sqlite", schema=STORE, access=None, role="anyone")
    else:
        decision = decide(ds, role, sql)
    assert decision.rule == rule


def test_the_function_list_is_the_caller_s_per_dialect() -> None:
    sql = "SELECT upper(Name) AS n FROM Genre"
    decision = check_sql(sql, dialect="sqlite", schema=STORE, access=None, role="a", dangerous_functions=["UPPER"])
    assert (decision.rule, decision.denied) == ("dangerous_function", ["upper()"])
    empty = check_sql("SELECT readfile('x') AS f", dialect="sqlite", schema=STORE, access=None, role="a",
                      dangerous_functions=[])
    assert empty.rule is None  # an empty list turns the rule off for that dialect
    from nl2sql_assets.config import PoliciesConfig

    own = PoliciesConfig(dangerous_functions={"sqlite": ["upper"]})
    assert own.dangerous_for("sqlite") == {"upper"}
    assert own.dangerous_for("duckdb") is None  # a dialect it leaves out keeps its engine's built-in list
    duck = check_sql("SELECT * FROM read_csv_auto('x.csv')", dialect="duckdb", schema=STORE, access=None, role="a",
                     dangerous_functions=own.dangerous_for("duckdb"))
    assert duck.rule == "dangerous_function"


# ---------------------------------------------------------------- forbidden_join

JOINS = DatasourceAccess(allow=["*"], forbidden_joins=[["Customer", "Employee"], ["Genre", "Track", "Customer"]])

FORBIDDEN_JOIN = [
    ("SELECT c.FirstName FROM Customer c JOIN Employee e ON e.EmployeeId = c.CustomerId", "forbidden_join"),
    ("SELECT c.FirstName FROM customer c, EMPLOYEE e WHERE e.EmployeeId = c.CustomerId", "forbidden_join"),
    # through a derived table, a CTE, a set operation and a lateral
    ("SELECT c.FirstName FROM Customer c JOIN (SELECT EmployeeId FROM Employee) e ON e.EmployeeId = c.CustomerId",
     "forbidden_join"),
    ("WITH e AS (SELECT EmployeeId FROM Employee) SELECT c.FirstName FROM Customer c JOIN e "
     "ON e.EmployeeId = c.CustomerId", "forbidden_join"),
    ("SELECT c.FirstName FROM Customer c JOIN (SELECT EmployeeId AS i FROM Employee UNION SELECT GenreId FROM Genre) u "
     "ON u.i = c.CustomerId", "forbidden_join"),
    # a sub-query in WHERE or the select list is its own scope: no join
    ("SELECT c.FirstName FROM Customer c WHERE EXISTS (SELECT 1 FROM Employee e WHERE e.EmployeeId = c.CustomerId)",
     None),
    ("SELECT c.FirstName, (SELECT COUNT(*) FROM Employee) AS staff FROM Customer c", None),
    ("SELECT FirstName FROM Customer UNION SELECT FirstName FROM Employee", None),  # side by side, not joined
    # a group forbids only all of its tables together
    ("SELECT t.Name FROM Track t JOIN Genre g ON g.GenreId = t.GenreId", None),
    ("SELECT t.Name FROM Track t JOIN Genre g ON g.GenreId = t.GenreId JOIN Customer c ON c.CustomerId = t.TrackId",
     "forbidden_join"),
]


@pytest.mark.parametrize(("sql", "rule"), FORBIDDEN_JOIN, ids=[r[0][:60] for r in FORBIDDEN_JOIN])
def test_forbidden_join(sql: str, rule: str | None) -> None:
    decision = check_sql(sql, dialect="sqlite", schema=STORE, access=JOINS, role="analyst")
    assert decision.rule == rule, decision.detail
    assert check_sql(sql, dialect="sqlite", schema=STORE, access=DatasourceAccess(allow=["*"]), role="admin").allowed


def test_a_lateral_join_counts_as_a_join() -> None:
    sql = ("SELECT t.ticket_id, m.body FROM tickets t, LATERAL (SELECT body FROM ticket_messages x "
           "WHERE x.ticket_id = t.ticket_id) m")
    access = DatasourceAccess(allow=["*"], forbidden_joins=[["tickets", "ticket_messages"]])
    decision = check_sql(sql, dialect="duckdb", schema=SUPPORT, access=access, role="analyst")
    assert decision.rule == "forbidden_join" and decision.denied == ["tickets", "ticket_messages"]


# ---------------------------------------------------------------- row_budget

ROW_BUDGET = [
    ("SELECT Name FROM Track LIMIT 100", 100, None),
    ("SELECT Name FROM Track LIMIT 101", 100, "row_budget"),
    ("SELECT Name FROM Track", 100, None),  # no LIMIT: the executor caps what it fetches
    ("SELECT Name FROM Track LIMIT 100 OFFSET 5000", 100, None),  # at most 100 rows come back
    ("SELECT Name FROM Track LIMIT 5000, 100", 100, None),  # SQLite's LIMIT offset, count
    ("SELECT Name FROM Track LIMIT 100, 5000", 100, "row_budget"),
    ("SELECT Name FROM Track LIMIT (SELECT COUNT(*) FROM Genre)", 100, "row_budget"),  # no fixed count
    ("SELECT Name FROM Track UNION SELECT Name FROM Genre LIMIT 500", 100, "row_budget"),
    ("WITH t AS (SELECT Name FROM Track LIMIT 5000) SELECT Name FROM t LIMIT 10", 100, None),  # the outermost counts
    ("SELECT Name FROM Track LIMIT 5000", None, None),  # no budget
]


@pytest.mark.parametrize(("sql", "budget", "rule"), ROW_BUDGET, ids=[r[0][:60] for r in ROW_BUDGET])
def test_row_budget(sql: str, budget: int | None, rule: str | None) -> None:
    access = DatasourceAccess(allow=["*"], row_budget=budget)
    assert check_sql(sql, dialect="sqlite", schema=STORE, access=access, role="viewer").rule == rule


def test_duckdb_percent_and_fetch_limits() -> None:
    access = DatasourceAccess(allow=["*"], row_budget=100)
    for sql, rule in [("SELECT status FROM tickets LIMIT 10%", "row_budget"),
                      ("SELECT status FROM tickets FETCH FIRST 50 ROWS ONLY", None),
                      ("SELECT status FROM tickets FETCH FIRST 500 ROWS ONLY", "row_budget")]:
        assert check_sql(sql, dialect="duckdb", schema=SUPPORT, access=access, role="v").rule == rule, sql


def test_a_role_s_budget_applies_where_its_datasource_sets_none() -> None:
    from nl2sql_assets.config import RolePolicy

    role = RolePolicy(row_budget=100, datasources={"store": DatasourceAccess(allow=["*"]),
                                                   "big": DatasourceAccess(allow=["*"], row_budget=5000)})
    assert role.access("store").row_budget == 100
    assert role.access("big").row_budget == 5000
    assert role.access("elsewhere").row_budget == 100 and not role.access("elsewhere").allows_table("x")



def test_a_read_the_database_reports_and_the_analysis_missed_fails_closed() -> None:
    """A server's own word on a statement (its adapter's ``statement_reads``) must be covered by the
    facts: a read only the server saw refuses the statement; its error is the SQL's fault."""
    missed = check_sql("SELECT Name FROM Genre", dialect="sqlite", schema=STORE, access=None, role="a",
                       database=lambda s: (None, frozenset({("Genre", "Name"), ("Genre", "GenreId")})))
    assert not missed.allowed and missed.rule == "resolved_names"
    assert "Genre.GenreId" in (missed.detail or "")
    covered = check_sql("SELECT Name AS n FROM Genre", dialect="sqlite", schema=STORE, access=None, role="a",
                        database=lambda s: (None, frozenset({("Genre", "Name")})))
    assert covered.allowed
    wrong = check_sql("SELECT g.Name FROM Genre g", dialect="sqlite", schema=STORE, access=None, role="a",
                      database=lambda s: ('column "name" does not exist', None))
    assert not wrong.allowed and wrong.fault == "sql" and "does not exist" in (wrong.detail or "")
