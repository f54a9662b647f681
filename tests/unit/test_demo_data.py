"""The demo: deterministic support/webanalytics data, its edge cases, the policy and the project writer."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from nl2sql_assets import demo
from nl2sql_assets.config import DatasourceConfig, PoliciesConfig, ProjectConfig, load_config
from nl2sql_assets.datasources.chinook import CHINOOK_SHA256, sha256_file
from nl2sql_assets.datasources.duckdb_adapter import CONNECT_CONFIG, DuckDBAdapter
from nl2sql_assets.demo import files as demo_files
from nl2sql_assets.paths import packaged_suites_dir

REPO = Path(__file__).resolve().parents[2]
LOW, HIGH = "2009-01-01 00:00:00", "2013-12-22 23:59:59"


@pytest.fixture(scope="module")
def chinook_file(chinook_path: Path) -> Path:
    return chinook_path


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory, chinook_file: Path) -> dict[str, Any]:
    """The two databases written twice, into two folders."""
    first, second = tmp_path_factory.mktemp("gen1"), tmp_path_factory.mktemp("gen2")
    paths = demo.write_demo_databases(first, chinook=chinook_file)
    again = demo.write_demo_databases(second, chinook=chinook_file)
    return {"paths": paths, "again": again, "folders": (first, second)}


@pytest.fixture(scope="module")
def db(generated: dict[str, Any]) -> Iterator[Any]:
    """query(datasource, sql) -> rows, through the read-only adapters."""
    adapters = {
        name: DuckDBAdapter(DatasourceConfig(id=name, engine="duckdb", path=path, row_limit=100_000))
        for name, path in generated["paths"].items()
    }

    def query(name: str, sql: str) -> list[list[Any]]:
        out = adapters[name].execute(sql)
        assert not out.truncated
        return out.rows

    yield query
    for adapter in adapters.values():
        adapter.close()


def canonical_dump(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    # Same settings as the adapters: DuckDB refuses a second in-process connection with other settings.
    conn = duckdb.connect(str(path), read_only=True, config=dict(CONNECT_CONFIG))
    try:
        tables = [r[0] for r in conn.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in tables}
    finally:
        conn.close()


# ---------------------------------------------------------------- determinism and shape


def test_generation_is_deterministic(generated: dict[str, Any]) -> None:
    for name in ("support", "webanalytics"):
        a, b = generated["paths"][name], generated["again"][name]
        dump_a, dump_b = canonical_dump(a), canonical_dump(b)
        assert dump_a == dump_b
        assert all(dump_a[t] for t in dump_a)
        fa = DuckDBAdapter(DatasourceConfig(id=name, engine="duckdb", path=a))
        fb = DuckDBAdapter(DatasourceConfig(id=name, engine="duckdb", path=b))
        try:
            assert fa.introspect().fingerprint() == fb.introspect().fingerprint()
        finally:
            fa.close()
            fb.close()


def test_another_seed_gives_other_rows(chinook_file: Path) -> None:
    customers = demo.read_chinook_customers(chinook_file)
    assert (
        demo.build_support(customers, seed=1)["tickets"].rows
        != demo.build_support(customers, seed=2)["tickets"].rows
    )
    assert (
        demo.build_webanalytics(customers, seed=1)["sessions"].rows
        == demo.build_webanalytics(customers, seed=1)["sessions"].rows
    )


def test_generation_leaves_only_the_two_files(generated: dict[str, Any]) -> None:
    for folder in generated["folders"]:
        assert sorted(p.name for p in folder.iterdir()) == ["support.duckdb", "webanalytics.duckdb"]


def test_tables_keys_and_sizes(db: Any) -> None:
    sizes = {
        ("support", "agents"): (10, 20),
        ("support", "customers"): (59, 59),
        ("support", "tickets"): (300, 3000),
        ("support", "ticket_messages"): (1000, 6000),
        ("webanalytics", "devices"): (8, 20),
        ("webanalytics", "referrers"): (6, 12),
        ("webanalytics", "sessions"): (1000, 4000),
        ("webanalytics", "page_views"): (3000, 10000),
        ("webanalytics", "conversions"): (100, 1000),
    }
    for (name, table), (low, high) in sizes.items():
        (count,) = db(name, f"SELECT count(*) FROM {table}")[0]
        assert low <= count <= high, (table, count)
    fks = db(
        "support",
        "SELECT table_name, referenced_table FROM duckdb_constraints() WHERE constraint_type = 'FOREIGN KEY' ORDER BY 1, 2",
    )
    assert fks == [["ticket_messages", "tickets"], ["tickets", "agents"], ["tickets", "customers"]]
    pks = db(
        "webanalytics",
        "SELECT table_name FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY' ORDER BY 1",
    )
    assert [r[0] for r in pks] == ["conversions", "devices", "page_views", "referrers", "sessions"]


# ---------------------------------------------------------------- shared with Chinook


def test_customers_are_chinooks(db: Any, chinook_file: Path) -> None:
    conn = sqlite3.connect(f"file:{chinook_file}?mode=ro", uri=True)
    chinook = [
        list(r)
        for r in conn.execute(
            "SELECT CustomerId, Email, FirstName, LastName, Country FROM Customer ORDER BY 1"
        )
    ]
    conn.close()
    assert len(chinook) == 59
    support = db(
        "support", "SELECT customer_id, email, first_name, last_name, country FROM customers ORDER BY 1"
    )
    assert support == chinook
    ids = {r[0] for r in chinook}
    for table in ("sessions", "conversions"):
        used = {
            r[0]
            for r in db(
                "webanalytics", f"SELECT DISTINCT customer_id FROM {table} WHERE customer_id IS NOT NULL"
            )
        }
        assert used and used <= ids, table
    assert {r[0] for r in db("support", "SELECT DISTINCT customer_id FROM tickets")} <= ids


TIMESTAMPS = [
    ("support", "customers", "signup_at"),
    ("support", "tickets", "created_at"),
    ("support", "tickets", "resolved_at"),
    ("support", "ticket_messages", "sent_at"),
    ("support", "agents", "hired_at"),
    ("webanalytics", "sessions", "started_at"),
    ("webanalytics", "sessions", "ended_at"),
    ("webanalytics", "page_views", "viewed_at"),
    ("webanalytics", "conversions", "converted_at"),
]


@pytest.mark.parametrize(("name", "table", "column"), TIMESTAMPS)
def test_every_moment_is_inside_chinooks_window(db: Any, name: str, table: str, column: str) -> None:
    low, high = db(name, f"SELECT min({column})::TIMESTAMP, max({column})::TIMESTAMP FROM {table}")[0]
    assert low >= LOW and high <= HIGH, (low, high)


# ---------------------------------------------------------------- the deliberate edge cases


def test_some_customers_have_no_tickets(db: Any) -> None:
    rows = db(
        "support",
        "SELECT count(*) FROM customers c WHERE NOT EXISTS (SELECT 1 FROM tickets t WHERE t.customer_id = c.customer_id)",
    )
    assert rows[0][0] >= 3


def test_some_customers_have_no_sessions(db: Any) -> None:
    with_sessions = {
        r[0]
        for r in db("webanalytics", "SELECT DISTINCT customer_id FROM sessions WHERE customer_id IS NOT NULL")
    }
    assert 3 <= 59 - len(with_sessions) <= 10


def test_anonymous_sessions_exist(db: Any) -> None:
    anonymous, total = db(
        "webanalytics", "SELECT count(*) FILTER (WHERE customer_id IS NULL), count(*) FROM sessions"
    )[0]
    assert 0.2 * total <= anonymous <= 0.6 * total


def test_a_ticket_without_messages(db: Any) -> None:
    rows = db(
        "support",
        "SELECT t.ticket_id, t.status FROM tickets t LEFT JOIN ticket_messages m USING (ticket_id) WHERE m.message_id IS NULL",
    )
    assert rows and all(status == "open" for _, status in rows)


def test_customers_who_viewed_pricing_and_never_converted(db: Any) -> None:
    rows = db(
        "webanalytics",
        "SELECT DISTINCT s.customer_id FROM sessions s JOIN page_views v USING (session_id) "
        "WHERE v.path = '/pricing' AND s.customer_id IS NOT NULL "
        "AND s.customer_id NOT IN (SELECT customer_id FROM conversions WHERE customer_id IS NOT NULL)",
    )
    assert len(rows) >= 3


def test_nullable_columns_hold_nulls_where_they_should(db: Any) -> None:
    rated, unrated, open_unresolved, resolved_unresolved, unassigned = db(
        "support",
        "SELECT count(satisfaction_score), count(*) FILTER (WHERE satisfaction_score IS NULL AND resolved_at IS NOT NULL), "
        "count(*) FILTER (WHERE status IN ('open', 'pending') AND resolved_at IS NOT NULL), "
        "count(*) FILTER (WHERE status IN ('resolved', 'closed') AND resolved_at IS NULL), "
        "count(*) FILTER (WHERE agent_id IS NULL) FROM tickets",
    )[0]
    assert rated > 0 and unrated > 0
    assert open_unresolved == 0 and resolved_unresolved == 0
    assert unassigned > 0
    assert db("support", "SELECT count(*) FROM tickets WHERE agent_id IS NULL AND status <> 'open'") == [[0]]
    anonymous_kinds = db("webanalytics", "SELECT DISTINCT kind FROM conversions WHERE customer_id IS NULL")
    assert anonymous_kinds == [["signup"]]


# ---------------------------------------------------------------- the data hangs together


def test_support_timelines_make_sense(db: Any) -> None:
    checks = {
        "resolved before created": "SELECT count(*) FROM tickets WHERE resolved_at < created_at",
        "ticket before sign-up": "SELECT count(*) FROM tickets t JOIN customers c USING (customer_id) WHERE t.created_at < c.signup_at",
        "agent not hired yet": "SELECT count(*) FROM tickets t JOIN agents a USING (agent_id) WHERE t.created_at::DATE < a.hired_at",
        "message outside its ticket": (
            "SELECT count(*) FROM ticket_messages m JOIN tickets t USING (ticket_id) "
            "WHERE m.sent_at < t.created_at OR m.sent_at > coalesce(t.resolved_at, TIMESTAMP '2013-12-22 23:59:59')"
        ),
        "first message not from the customer": (
            "SELECT count(*) FROM (SELECT ticket_id, arg_min(sender, message_id) AS first FROM ticket_messages GROUP BY 1) "
            "WHERE first <> 'customer'"
        ),
        "score out of range": "SELECT count(*) FROM tickets WHERE satisfaction_score NOT BETWEEN 1 AND 5",
    }
    for what, sql in checks.items():
        assert db("support", sql) == [[0]], what


def test_webanalytics_timelines_make_sense(db: Any) -> None:
    checks = {
        "session ends before it starts": "SELECT count(*) FROM sessions WHERE ended_at < started_at",
        "view outside its session": (
            "SELECT count(*) FROM page_views v JOIN sessions s USING (session_id) "
            "WHERE v.viewed_at < s.started_at OR v.viewed_at > s.ended_at"
        ),
        "conversion outside its session": (
            "SELECT count(*) FROM conversions c JOIN sessions s USING (session_id) "
            "WHERE c.converted_at < s.started_at OR c.converted_at > s.ended_at"
        ),
        "conversion by someone else": (
            "SELECT count(*) FROM conversions c JOIN sessions s USING (session_id) "
            "WHERE c.customer_id IS DISTINCT FROM s.customer_id"
        ),
        "anonymous checkout": (
            "SELECT count(*) FROM page_views v JOIN sessions s USING (session_id) "
            "WHERE s.customer_id IS NULL AND v.path IN ('/checkout', '/account')"
        ),
        "paid conversion without an amount": "SELECT count(*) FROM conversions WHERE kind <> 'signup' AND NOT amount > 0",
        "purchase without a checkout view": (
            "SELECT count(*) FROM conversions c WHERE kind = 'purchase' AND NOT EXISTS "
            "(SELECT 1 FROM page_views v WHERE v.session_id = c.session_id AND v.path = '/checkout')"
        ),
    }
    for what, sql in checks.items():
        assert db("webanalytics", sql) == [[0]], what


# ---------------------------------------------------------------- atomic writes


def test_a_crash_while_writing_leaves_no_half_database(
    chinook_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "support.duckdb"
    target.write_bytes(b"the previous file")
    calls = 0
    real = demo_files._load_csv

    def crash_on_third(*args: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise RuntimeError("disk full")
        real(*args)

    monkeypatch.setattr(demo_files, "_load_csv", crash_on_third)
    with pytest.raises(RuntimeError, match="disk full"):
        demo.write_support(target, demo.read_chinook_customers(chinook_file))
    assert target.read_bytes() == b"the previous file"
    assert [p.name for p in tmp_path.iterdir()] == ["support.duckdb"]


# ---------------------------------------------------------------- the policy and questions

POLICY_CASES = [
    # (role, datasource, table, column or None, allowed)
    ("admin", "chinook", "Employee", None, True),
    ("admin", "support", "ticket_messages", "body", True),
    ("analyst", "chinook", "Employee", None, False),
    ("analyst", "chinook", "Employee", "LastName", False),
    ("analyst", "chinook", "Customer", "Email", True),
    ("analyst", "chinook", "Invoice", None, True),
    ("analyst", "support", "ticket_messages", "sent_at", True),
    ("analyst", "support", "ticket_messages", "body", False),
    ("analyst", "webanalytics", "sessions", "customer_id", True),
    ("viewer", "chinook", "Track", "Name", True),
    ("viewer", "chinook", "PlaylistTrack", None, True),
    ("viewer", "chinook", "Customer", None, False),
    ("viewer", "chinook", "Invoice", None, False),
    ("viewer", "chinook", "Employee", None, False),
    ("viewer", "support", "tickets", "category", True),
    ("viewer", "support", "tickets", "customer_id", False),
    ("viewer", "support", "customers", None, False),
    ("viewer", "support", "ticket_messages", None, False),
    ("viewer", "support", "agents", "team", True),
    ("viewer", "support", "agents", "name", False),
    ("viewer", "webanalytics", "page_views", "path", True),
    ("viewer", "webanalytics", "sessions", "customer_id", False),
    ("viewer", "webanalytics", "conversions", "customer_id", False),
    ("viewer", "webanalytics", "conversions", "amount", True),
]


@pytest.mark.parametrize(("role", "ds", "table", "column", "allowed"), POLICY_CASES)
def test_demo_policy(role: str, ds: str, table: str, column: str | None, allowed: bool) -> None:
    policies = PoliciesConfig.model_validate(demo.DEMO_POLICIES)
    assert policies.default_role == "analyst" and policies.refusal_names_tables is True
    access = policies.role(role).access(ds)
    if column is None:
        assert access.allows_table(table) is allowed
    else:
        assert access.allows_column(table, column) is allowed


def test_policy_names_only_real_tables_and_columns(db: Any, chinook_file: Path) -> None:
    conn = sqlite3.connect(f"file:{chinook_file}?mode=ro", uri=True)
    known = {
        "chinook": {
            (r[0].lower(), r[1].lower())
            for r in conn.execute(
                "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p WHERE m.type = 'table'"
            )
        }
    }
    conn.close()
    for name in ("support", "webanalytics"):
        known[name] = {
            (t.lower(), c.lower())
            for t, c in db(name, "SELECT table_name, column_name FROM duckdb_columns()")
        }
    for role in demo.DEMO_POLICIES["roles"].values():
        for ds, access in role["datasources"].items():
            for entry in [*access.get("allow", []), *access.get("deny", [])]:
                if entry == "*":
                    continue
                table, _, column = entry.lower().partition(".")
                assert any(t == table and (not column or c == column) for t, c in known[ds]), (ds, entry)


def test_sample_questions() -> None:
    assert len(demo.SUPPORT_QUESTIONS) == 4 and len(demo.WEBANALYTICS_QUESTIONS) == 4
    assert all(q.endswith("?") for q in demo.SUPPORT_QUESTIONS + demo.WEBANALYTICS_QUESTIONS)


# ---------------------------------------------------------------- init_demo and ensure_demo_data


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory, chinook_file: Path) -> demo.DemoProject:
    return demo.init_demo(tmp_path_factory.mktemp("demo") / "proj", chinook=chinook_file)


def test_init_demo_writes_a_loadable_project(project: demo.DemoProject) -> None:
    config = load_config(project.config, environ={})
    assert [ds.id for ds in config.datasources] == ["chinook", "support", "webanalytics"]
    assert [ds.engine for ds in config.datasources] == ["sqlite", "duckdb", "duckdb"]
    for ds in config.datasources:
        assert ds.path == project.datasources[ds.id] and ds.path.is_file()
        assert ds.path.parent == project.root / "data"
        assert ds.row_limit == 1000 and ds.timeout_s == 10 and ds.description and ds.sample_questions
    assert sha256_file(project.datasources["chinook"]) == CHINOOK_SHA256
    assert config.policies.default_role == "analyst" and sorted(config.policies.roles) == [
        "admin",
        "analyst",
        "viewer",
    ]
    assert config.llm.for_node("planner").model == "openai/gpt-4o-mini"
    assert config.llm.for_node("planner").api_key == ""
    evals = config.evals_config
    assert evals.suites == [
        project.root / "suites" / name for name in ("chinook.yaml", "chinook_policy.yaml", "chinook_clarify.yaml")
    ]
    assert evals.curated is True and evals.max_cost_usd == 5.0 and evals.gate.max_regressions == 2
    assert evals.scorers == ["result_match", "policy", "outcome", "faithfulness", "retrieval_recall", "routing"]
    shipped = sorted(p.name for p in packaged_suites_dir().glob("*.yaml"))
    assert sorted(p.name for p in project.suites_dir.iterdir()) == shipped
    assert project.benchmarks_dir.is_dir() and list(project.benchmarks_dir.iterdir()) == []
    assert project.config.read_text().startswith("# nl2sql-assets project")
    assert (
        load_config(project.config, environ={"OPENAI_API_KEY": "sk-test"}).llm.for_node("planner").api_key
        == "sk-test"
    )


def test_init_demo_refuses_an_existing_project(project: demo.DemoProject, chinook_file: Path) -> None:
    before = project.config.read_text()
    with pytest.raises(demo.DemoError, match=r"already holds a project.*--force"):
        demo.init_demo(project.root, chinook=chinook_file)
    assert project.config.read_text() == before


def test_init_demo_force_and_a_non_empty_folder(tmp_path: Path, chinook_file: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    first = demo.init_demo(tmp_path, chinook=chinook_file, data_dir_name="db")
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert (
        load_config(first.config, environ={}).datasource("support").path == tmp_path / "db" / "support.duckdb"
    )
    first.config.write_text("# edited\n")
    again = demo.init_demo(tmp_path, chinook=chinook_file, force=True, data_dir_name="db")
    assert again.config.read_text() == demo.render_project_yaml(data_dir="db")


def test_ensure_demo_data_fills_in_and_repairs(tmp_path: Path, chinook_file: Path) -> None:
    (tmp_path / "nl2sql.yaml").write_text(demo.render_project_yaml())
    (tmp_path / "evals.yaml").write_text(demo.render_evals_yaml())
    config = load_config(tmp_path / "nl2sql.yaml", environ={})
    data = tmp_path / "data"
    assert not data.exists()

    paths = demo.ensure_demo_data(config, chinook=chinook_file)
    assert paths == {ds: data / name for ds, (_, name) in demo.DEMO_FILES.items()}
    assert sha256_file(paths["chinook"]) == CHINOOK_SHA256
    stamps = {ds: p.stat().st_mtime_ns for ds, p in paths.items()}

    demo.ensure_demo_data(config, chinook=chinook_file)  # all good: nothing is rewritten
    assert {ds: p.stat().st_mtime_ns for ds, p in paths.items()} == stamps

    paths["chinook"].write_bytes(b"not chinook")
    paths["webanalytics"].unlink()
    demo.ensure_demo_data(config, chinook=chinook_file)
    assert sha256_file(paths["chinook"]) == CHINOOK_SHA256
    assert canonical_dump(paths["webanalytics"])["referrers"]
    assert paths["support"].stat().st_mtime_ns == stamps["support"]


def test_a_second_check_in_one_process_skips_unchanged_files_and_rechecks_changed_ones(
        tmp_path: Path, chinook_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pipeline checks the demo data in its preflight and again in its demo_datasets asset:
    the second check of unchanged files opens nothing; a file written in between is checked
    (and repaired) in full."""
    from nl2sql_assets.demo import project as demo_project

    (tmp_path / "nl2sql.yaml").write_text(demo.render_project_yaml())
    (tmp_path / "evals.yaml").write_text(demo.render_evals_yaml())
    config = load_config(tmp_path / "nl2sql.yaml", environ={})
    paths = demo.ensure_demo_data(config, chinook=chinook_file)
    opened: list[str] = []
    real_ok, real_sha = demo_project._duckdb_ok, demo_project.sha256_file
    monkeypatch.setattr(demo_project, "_duckdb_ok", lambda ds, tables: opened.append(ds.id) or real_ok(ds, tables))
    monkeypatch.setattr(demo_project, "sha256_file", lambda path: opened.append("chinook") or real_sha(path))

    demo.ensure_demo_data(config, chinook=chinook_file)
    assert opened == []

    size = paths["support"].stat().st_size
    paths["support"].write_bytes(b"\0" * size)  # damaged in place, the same size
    demo.ensure_demo_data(config, chinook=chinook_file)
    assert opened == ["support"]
    assert canonical_dump(paths["support"])["tickets"]  # generated again


def test_ensure_demo_data_leaves_other_datasources_alone(tmp_path: Path, chinook_file: Path) -> None:
    mine = tmp_path / "mine.sqlite"
    mine.write_bytes(b"my own database")
    config = ProjectConfig(
        datasources=[
            DatasourceConfig(id="chinook", engine="sqlite", path=mine),
            DatasourceConfig(id="sales", engine="duckdb", path=tmp_path / "sales.duckdb"),
        ]
    )
    assert demo.ensure_demo_data(config, chinook=chinook_file) == {}
    assert mine.read_bytes() == b"my own database"
    assert not (tmp_path / "sales.duckdb").exists()


# ---------------------------------------------------------------- the repository root project


def test_root_config_files_are_what_the_demo_renders() -> None:
    hint = "regenerate them with: python -m nl2sql_assets.demo"
    assert (REPO / "nl2sql.yaml").read_text(encoding="utf-8") == demo.render_project_yaml(), hint
    assert (REPO / "evals.yaml").read_text(encoding="utf-8") == demo.render_evals_yaml(), hint


def test_root_config_loads() -> None:
    config = load_config(REPO / "nl2sql.yaml", environ={})
    assert [ds.path for ds in config.datasources] == [
        REPO / "data" / name for _, name in demo.DEMO_FILES.values()
    ]
    assert config.evals_config.suites == [
        REPO / "suites" / name for name in ("chinook.yaml", "chinook_policy.yaml", "chinook_clarify.yaml")
    ]
