"""Neighbour databases of a server datasource (Postgres, MariaDB), end to end: made in a scratch place
beside the source (a schema each in ``<database>_nl2sql_neighbours`` on Postgres, a database each on
MariaDB), never inside it; near misses the server's own data hides are taken back there or by a witness;
the gold audit runs there; ``neighbours prune`` drops what no suite uses; no password is written down."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from nl2sql_assets.cli import main
from nl2sql_assets.evaluation.grading import GradeReport
from nl2sql_assets.evaluation.neighbours.servers import PREFIX, ServerFiles, project_tag, read_handle
from nl2sql_assets.evaluation.suites import load_suite
from tests.servers.conftest import Server, ServerProject, drop_neighbours


def _cli(*argv: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def _namespaces(root: Path) -> list[tuple[Path, str]]:
    """Every kept neighbour's handle under the project and the namespace it names."""
    out = []
    for handle in sorted((root / "warehouse" / "neighbours").glob("*/*/neighbour_*.json")):
        _, namespace = read_handle(handle)
        assert namespace is not None
        out.append((handle, namespace))
    return out


def _exists(server: Server, handle: Path, namespace: str) -> bool:
    files = ServerFiles(server.engine)
    config, _ = read_handle(handle)
    return namespace in files.catalog.namespaces(config)


def test_the_neighbours_live_beside_the_source_never_in_it(server_project: ServerProject) -> None:
    server = server_project.server
    kept = _namespaces(server_project.root)
    assert {h.parent.parent.name for h, _ in kept} == {"chinook", "support", "webanalytics"}
    for handle, namespace in kept:
        assert namespace.startswith(PREFIX) and _exists(server, handle, namespace)
        text = handle.read_text(encoding="utf-8")
        assert "password" not in text.lower() or '"password_env": null' in text  # settings, never a secret
        config, _ = read_handle(handle)
        if server.engine == "postgres":  # a schema in a scratch database beside the source's
            assert config.database == "test_nl2sql_neighbours"
    # the source holds only its own tables: nothing of ours was made inside it
    own = server_project.prefix + "chinook"
    if server.engine == "postgres":
        tables = server.execute(f"SELECT count(*) FROM pg_tables WHERE schemaname = '{own}'")
    else:
        tables = server.execute(f"SELECT count(*) FROM information_schema.tables WHERE table_schema = '{own}'")
    assert tables[0][0] == 11


def _near_misses(suite_path: Path) -> dict[str, str]:
    """Near misses of the suite's (translated) gold that the server's own rows cannot tell apart."""
    cases = {c.id: c for c in load_suite(suite_path).cases if c.sql}
    edits = {
        "chinook_038": ("> 100", ">= 100"),  # a threshold met exactly
        "chinook_035": ("JOIN track", "LEFT JOIN track"),  # an outer join where every album has tracks
        "chinook_037": ("COUNT(pt.trackid)", "COUNT(DISTINCT pt.trackid)"),  # two playlists sharing a name
    }
    out = {}
    for key, (old, new) in edits.items():
        sql = " ".join((cases[key].sql or "").split())
        found = re.search(re.escape(old), sql, re.IGNORECASE)  # Postgres folds the names to lower case
        assert found is not None, (key, sql)
        out[key] = sql[:found.start()] + new.replace(old, found.group(0)) + sql[found.end():] if old in new \
            else sql[:found.start()] + new + sql[found.end():]
    return out


def test_near_misses_the_server_hides_are_taken_back_there_and_the_gold_is_not(server_demo: Path,
                                                                               tmp_path: Path) -> None:
    suite_path = server_demo / "suites" / "chinook.yaml"
    cases = [c for c in load_suite(suite_path).cases if c.sql and c.rows is not None]
    predictions = {c.id: c.sql for c in cases}
    near = _near_misses(suite_path)
    predictions.update(near)
    predicted = tmp_path / "predictions.json"
    predicted.write_text(json.dumps(predictions), encoding="utf-8")
    out_file = tmp_path / "grade.json"
    code, out, err = _cli("--config", server_demo / "nl2sql.yaml", "eval", "grade", predicted, "--suite", suite_path,
                          "--witness", 64, "--out", out_file)
    assert code == 0, out + err
    report = GradeReport.model_validate_json(out_file.read_text(encoding="utf-8"))
    by_id = {g.case_id: g for g in report.cases}
    for key in near:
        g = by_id[key]
        assert g.strict.passed, key  # the server's own rows hide the difference ...
        assert g.neighbour_robust is not None and not g.neighbour_robust.passed, key  # ... a neighbour or a witness does not
        assert g.neighbour_robust.reason in ("fails_on_neighbour", "fails_on_witness")
        assert g.neighbour_gold_rows != g.neighbour_predicted_rows
    for g in report.cases:
        if g.case_id not in near and g.strict.passed:
            assert g.neighbour_robust is not None and g.neighbour_robust.passed, g.case_id  # the gold holds


def test_the_gold_audit_runs_on_the_server_as_on_a_file(server_demo: Path, tmp_path: Path) -> None:
    out_file = tmp_path / "audit.json"
    code, out, err = _cli("--config", server_demo / "nl2sql.yaml", "eval", "audit", server_demo / "suites" /
                          "chinook.yaml", "--out", out_file)
    assert code == 0, out + err
    audit = json.loads(out_file.read_text(encoding="utf-8"))
    assert audit["cases"] == 43 and set(audit["sets"]) == {"chinook"}
    assert "gold queries audited" in out


def test_prune_drops_the_sets_no_suite_uses_and_stray_namespaces(server_demo: Path, server_project: ServerProject
                                                                  ) -> None:
    server = server_project.server
    files = ServerFiles(server.engine)
    (handle, namespace), *_ = _namespaces(server_demo)
    config, _ = read_handle(handle)
    # a set made with other settings, and a namespace a killed build of this project left behind
    old_home = handle.parent.parent / "0123456789abcdef0123"
    old_home.mkdir()
    ours = f"{PREFIX}{project_tag(server_demo / 'warehouse' / 'neighbours')}_"
    stray = f"{ours}leftover{server_project.prefix.rstrip('_')}"
    source = files.read(handle, 1)
    files.catalog.make(config, stray, source, {})
    # another project's, building in the same scratch place: never this project's to sweep
    foreign = f"{PREFIX}0badc0de_kept{server_project.prefix.rstrip('_')}"
    files.catalog.make(config, foreign, source, {})
    old_handle = old_home / f"neighbour_00{files.suffix}"
    other = f"{PREFIX}old{server_project.prefix.rstrip('_')}"
    files.catalog.make(config, other, source, {})
    from nl2sql_assets.evaluation.neighbours.servers import write_handle

    write_handle(old_handle, config, other)
    try:
        code, out, err = _cli("--config", server_demo / "nl2sql.yaml", "neighbours", "prune", "--dry-run")
        assert code == 0, out + err
        assert f"would remove set {old_home}" in out and f"would remove {stray} " in out
        assert old_home.is_dir() and stray in files.catalog.namespaces(config)  # a dry run removes nothing
        assert f"left {foreign} (another project's" in out
        code, out, err = _cli("--config", server_demo / "nl2sql.yaml", "neighbours", "prune")
        assert code == 0, out + err
        assert not old_home.exists()
        left = files.catalog.namespaces(config)
        assert stray not in left and other not in left
        assert namespace in left and handle.is_file()  # what the suites use stays
        assert foreign in left and f"left {foreign} " in out and "of other projects left" in out
        code, out, err = _cli("--config", server_demo / "nl2sql.yaml", "neighbours", "prune", "--every-project")
        assert code == 0, out + err
        left = files.catalog.namespaces(config)
        assert foreign not in left and namespace in left  # asked for: every namespace no set here names
    finally:
        for name in (stray, other, foreign):
            files.catalog.drop(config, name)


def _reader(server: Server, user: str, schemas: list[str]) -> None:
    """A login that may only read the source's ``schemas`` (databases on MySQL): it makes nothing."""
    if server.engine == "postgres":
        server.execute(f"CREATE ROLE {user} LOGIN", *(f'GRANT USAGE ON SCHEMA "{s}" TO {user}' for s in schemas),
                       *(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{s}" TO {user}' for s in schemas))
    else:
        server.execute(*(f"CREATE USER '{user}'@'{h}'" for h in ("%", "localhost")),
                       *(f"GRANT SELECT ON `{s}`.* TO '{user}'@'{h}'" for s in schemas for h in ("%", "localhost")))


def _as(server: Server, user: str, statement: str) -> list[Any]:
    """``statement`` run by ``user`` (autocommit: nothing but the rights stand in its way)."""
    parts = urlsplit(server.url)
    if server.engine == "postgres":
        import psycopg2

        conn = psycopg2.connect(host=parts.hostname, port=parts.port, user=user, dbname=parts.path.lstrip("/"),
                                connect_timeout=2)
        conn.autocommit = True
    else:
        import pymysql

        conn = pymysql.connect(host=parts.hostname, port=parts.port, user=user, connect_timeout=2, autocommit=True)
    with contextlib.closing(conn), conn.cursor() as cur:
        cur.execute(statement)
        return list(cur.fetchall()) if cur.description else []


def test_the_datasource_role_grades_on_neighbours_another_role_built_and_may_only_read_them(
        server_demo: Path, server_project: ServerProject, tmp_path: Path, monkeypatch: Any) -> None:
    """A read-only datasource role cannot make neighbours; the role evals.yaml's url_env names
    builds them and lets the datasource's role read them, and nothing more."""
    import yaml

    server = server_project.server
    user = f"nl2sql_r{uuid.uuid4().hex[:8]}"
    schemas = [f"{server_project.prefix}{d}" for d in ("chinook", "support", "webanalytics")]
    _reader(server, user, schemas)
    try:
        parts = urlsplit(server.url)
        text = (server_demo / "nl2sql.yaml").read_text(encoding="utf-8")
        (server_demo / "nl2sql.yaml").write_text(re.sub(r"  url(_env)?: .*\n", "  url_env: NL2SQL_TEST_READER\n",
                                                        text), encoding="utf-8")
        monkeypatch.setenv("NL2SQL_TEST_READER", f"{parts.scheme}://{user}@{parts.hostname}:{parts.port}{parts.path}")
        monkeypatch.setenv("NL2SQL_TEST_BUILDER", server.url)
        evals = yaml.safe_load((server_demo / "evals.yaml").read_text(encoding="utf-8"))
        evals["neighbours"] = {**evals["neighbours"], "url_env": "NL2SQL_TEST_BUILDER", "seed": 23}
        (server_demo / "evals.yaml").write_text(yaml.safe_dump(evals, sort_keys=False), encoding="utf-8")
        out_file = tmp_path / "run.json"
        code, out, err = _cli("--config", server_demo / "nl2sql.yaml", "eval", "run", "--mode", "plans", "--suite",
                              server_demo / "suites" / "chinook.yaml", "--out", out_file)
        assert code == 0, out + err
        assert "on neighbours" in out, out
        shared = {n for _, n in _namespaces(server_project.root)}  # the session's set, copied with the folder
        made = [(h, n) for h, n in _namespaces(server_demo) if h.parent.parent.name == "chinook" and n not in shared]
        assert len(made) == 4  # evals.yaml's count, built anew for seed 23
        for handle, namespace in made:
            config, _ = read_handle(handle)
            assert f"{user}@" in os.environ[config.url_env or ""]  # graded by the datasource's own role
            if server.engine == "postgres":  # built (owned) by the builder, not by the grading role
                assert server.execute(f"SELECT pg_get_userbyid(nspowner) FROM pg_namespace "
                                      f"WHERE nspname = '{namespace}'") == [(urlsplit(server.url).username,)]
            q = '"' if server.engine == "postgres" else "`"
            table = f"{q}{namespace}{q}.{q}{'genre' if server.engine == 'postgres' else 'Genre'}{q}"
            assert _as(server, user, f"SELECT count(*) FROM {table}")[0][0] >= 0  # it reads ...
            for write in (f"DELETE FROM {table}", f"CREATE TABLE {q}{namespace}{q}.x (a int)"):
                with pytest.raises(Exception, match=r"(?i)permission denied|command denied|access denied"):
                    _as(server, user, write)  # ... and may write nothing, whatever the transaction
    finally:
        drop_neighbours(server_demo)
        if server.engine == "postgres":
            server.execute(f"DROP OWNED BY {user}", f"DROP ROLE {user}")
        else:
            server.execute(*(f"DROP USER '{user}'@'{h}'" for h in ("%", "localhost")))


def test_a_large_table_is_sampled_across_its_extent_the_same_each_time(server: Server, prefix: str) -> None:
    """Neighbours copy at most max_rows of a table: from a large one, rows drawn over all of it
    (TABLESAMPLE pages on Postgres, slices of the integer key on MySQL), not its first rows, and the
    same rows on every read (the set's key is a digest of them)."""
    from nl2sql_assets.config import DatasourceConfig

    own = f"{prefix}big"
    if server.engine == "postgres":
        server.execute(f'CREATE SCHEMA "{own}"', f'CREATE TABLE "{own}".item (id int PRIMARY KEY, label text)',
                       f"INSERT INTO \"{own}\".item SELECT g, 'item ' || g FROM generate_series(1, 20000) g",
                       f'CREATE TABLE "{own}".small (id int PRIMARY KEY)',
                       f'INSERT INTO "{own}".small SELECT generate_series(1, 50)', f'ANALYZE "{own}".item',
                       f'CREATE TABLE "{own}".tag (name text PRIMARY KEY)',
                       f'INSERT INTO "{own}".tag SELECT label FROM "{own}".item', f'ANALYZE "{own}".tag')
        config = DatasourceConfig(id="big", engine="postgres", url=server.url, schemas=[own])
    else:
        digits = "(" + " UNION ALL ".join(f"SELECT {d} AS d" for d in range(10)) + ")"
        server.execute(f"CREATE DATABASE `{own}`", f"CREATE TABLE `{own}`.item (id int PRIMARY KEY, label text)",
                       f"INSERT INTO `{own}`.item SELECT n + 1, CONCAT('item ', n + 1) FROM (SELECT a.d + 10 * b.d + "
                       f"100 * c.d + 1000 * e.d + 10000 * f.d AS n FROM {digits} a, {digits} b, {digits} c, {digits} e, "
                       f"{digits} f) g WHERE n < 20000",
                       f"CREATE TABLE `{own}`.tag (name varchar(20) PRIMARY KEY)",
                       f"INSERT INTO `{own}`.tag SELECT label FROM `{own}`.item",
                       f"ANALYZE TABLE `{own}`.tag",
                       f"CREATE TABLE `{own}`.small (id int PRIMARY KEY)",
                       f"INSERT INTO `{own}`.small SELECT id FROM `{own}`.item WHERE id <= 50",
                       f"ANALYZE TABLE `{own}`.item")
        config = DatasourceConfig(id="big", engine="mysql", url=server.url, database=own)
    files = ServerFiles(server.engine)
    first = {t.name: t.rows for t in files.catalog.read(config, None, 100).tables}
    again = {t.name: t.rows for t in files.catalog.read(config, None, 100).tables}
    ids = sorted(r[0] for r in first["item"])
    assert 50 <= len(ids) <= 100 and len(set(ids)) == len(ids)
    assert ids[-1] > 10000 and ids[-1] - ids[0] > 10000  # from across the table, not ids 1..100
    assert first == again  # the same sample each read
    assert 0 < len(first["tag"]) <= 100  # no integer key: pages drawn (Postgres) or its first rows
    assert sorted(r[0] for r in first["small"]) == list(range(1, 51))  # a small table: all of it
