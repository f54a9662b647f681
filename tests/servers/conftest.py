"""The database servers the machine runs (Postgres on 127.0.0.1:5432, MariaDB on 127.0.0.1:3306, or
``NL2SQL_TEST_POSTGRES`` / ``NL2SQL_TEST_MYSQL``), for tests that evaluate on them.

Each test makes its own schemas or databases, under a prefix of its own, and drops them. A server
that does not answer fails the test at once with a message naming it and how to start it: a
missing server is never a skip, and never a hang (a two-second connect timeout).
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

URLS = {
    "postgres": os.environ.get("NL2SQL_TEST_POSTGRES", "postgresql://root@127.0.0.1:5432/test"),
    "mysql": os.environ.get("NL2SQL_TEST_MYSQL", "mysql://root@127.0.0.1:3306/test"),
}
START = {
    "postgres": "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
    "mysql": "start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd",
}


@dataclass(frozen=True)
class Server:
    """One server the tests run on: its engine's name, its URL, and a driver connection on demand."""

    engine: str
    url: str

    @property
    def label(self) -> str:
        return {"postgres": "Postgres", "mysql": "MariaDB/MySQL"}[self.engine]

    def connect(self) -> Any:
        """A driver connection with every right (the tests' own: to make and drop namespaces)."""
        parts = urlsplit(self.url)
        if self.engine == "postgres":
            import psycopg2

            conn = psycopg2.connect(host=parts.hostname, port=parts.port or 5432, user=parts.username,
                                    password=parts.password, dbname=parts.path.lstrip("/"), connect_timeout=2)
            conn.autocommit = True
            return conn
        import pymysql

        return pymysql.connect(host=parts.hostname, port=parts.port or 3306, user=parts.username or "",
                               password=parts.password or "", connect_timeout=2, autocommit=True)

    def drop(self, namespace: str) -> None:
        with contextlib.closing(self.connect()) as conn, conn.cursor() as cur:
            if self.engine == "postgres":
                cur.execute(f'DROP SCHEMA IF EXISTS "{namespace}" CASCADE')
            else:
                cur.execute(f"DROP DATABASE IF EXISTS `{namespace}`")

    def execute(self, *statements: str) -> list[Any]:
        """Run ``statements`` with every right; the last one's rows (if it returns any)."""
        rows: list[Any] = []
        with contextlib.closing(self.connect()) as conn, conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)
                rows = list(cur.fetchall()) if cur.description else []
        return rows


def reachable(url: str) -> str | None:
    """Why the server at ``url`` does not answer (None: it does), in two seconds at most."""
    parts = urlsplit(url)
    port = parts.port or (5432 if parts.scheme.startswith("postgres") else 3306)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", port), timeout=2):
            return None
    except OSError as exc:
        return f"{parts.hostname}:{port}: {exc}"


def server_of(engine: str) -> Server:
    url = URLS[engine]
    problem = reachable(url)
    if problem is not None:
        pytest.fail(f"the {engine} server the server tests need does not answer ({problem}); start it: "
                    f"{START[engine]} (or name another with NL2SQL_TEST_{engine.upper()})", pytrace=False)
    return Server(engine, url)


@pytest.fixture(params=["postgres", "mysql"])
def server(request: pytest.FixtureRequest) -> Server:
    """Each server in turn."""
    return server_of(request.param)


@pytest.fixture
def prefix(server: Server) -> Iterator[str]:
    """A namespace prefix of this test's own; every schema or database under it is dropped after."""
    own = f"t{uuid.uuid4().hex[:10]}_"
    yield own
    if server.engine == "postgres":
        names = [r[0] for r in server.execute(f"SELECT nspname FROM pg_namespace WHERE nspname LIKE '{own}%'")]
    else:
        names = [r[0] for r in server.execute(
            f"SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE '{own}%'")]
    for name in names:
        server.drop(name)


@dataclass(frozen=True)
class ServerProject:
    """The demo project on one server (``init --demo DIR --database URL``)."""

    server: Server
    root: Path
    prefix: str
    demo: Any


@pytest.fixture(scope="session", params=["postgres", "mysql"])
def server_project(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                   chinook_path: Path) -> Iterator[ServerProject]:
    """The demo on each server, made once per session under a prefix of its own and dropped after.
    Tests copy the folder (``server_demo``) when they write into it."""
    from nl2sql_assets.demo import init_demo

    server = server_of(request.param)
    own = f"s{uuid.uuid4().hex[:10]}_"
    root = tmp_path_factory.mktemp(f"{server.engine}-demo") / "demo"
    try:
        made = init_demo(root, chinook=chinook_path, database=server.url, namespace_prefix=own)
        small_neighbours(root)
        prepare_neighbours(root)
        yield ServerProject(server, root, own, made)
    finally:
        for ds in ("chinook", "support", "webanalytics"):
            server.drop(f"{own}{ds}")


@pytest.fixture(scope="session", autouse=True)
def _neighbours_dropped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every neighbour namespace this session's tests made on a server, dropped when they end."""
    yield
    drop_neighbours(tmp_path_factory.getbasetemp())


#: the server tests' neighbour settings: few and small, so a set is made in seconds (the defaults,
#: 10 of 24 and a witness search of 32, are measured by scripts/bench_servers.py --neighbours)
SMALL_NEIGHBOURS = {"count": 4, "seed": 1, "candidates": 8, "max_rows": 100, "witness": 0}


def small_neighbours(root: Path) -> None:
    import yaml

    evals = root / "evals.yaml"
    data = yaml.safe_load(evals.read_text(encoding="utf-8"))
    data["neighbours"] = dict(SMALL_NEIGHBOURS)
    evals.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def prepare_neighbours(root: Path) -> None:
    """Each datasource's kept set and each suite's gold audit, made once for the session: every copy
    of the project reads them back (their namespaces are shared, and only read)."""
    from nl2sql_assets.evaluation.neighbours.audit import audit_suite
    from nl2sql_assets.evaluation.neighbours.store import project_sets, project_suites
    from nl2sql_assets.evaluation.suites import load_suite
    from nl2sql_assets.paths import neighbours_dir
    from nl2sql_assets.project import load_project_config

    config = load_project_config(root / "nl2sql.yaml")
    settings = config.evals_config.neighbours
    assert settings is not None
    suites = project_suites(config, [(p.stem, load_suite(p)) for p in sorted((root / "suites").glob("*.yaml"))
                                     if p.stem in ("chinook", "multidomain")])
    sets = project_sets(config, suites, settings, neighbours_dir(root))
    for name, suite in suites:
        audit_suite(config, name, suite, settings, sets=sets)


def drop_neighbours(base: Path) -> None:
    """Every server namespace a handle under ``base`` (this session's folders) names, dropped."""
    from nl2sql_assets.evaluation.neighbours.servers import ServerFiles, read_handle

    for handle in base.glob("**/*.json"):
        if handle.name.endswith((".pg.json", ".mysql.json")):
            with contextlib.suppress(Exception):
                config, namespace = read_handle(handle)
                if namespace is not None:
                    ServerFiles(config.engine).discard(handle)


@pytest.fixture
def server_demo(server_project: ServerProject, tmp_path: Path) -> Path:
    """A private copy of the demo project folder on a server (its datasources are shared)."""
    import shutil

    target = tmp_path / "demo"
    shutil.copytree(server_project.root, target)
    return target
