"""The cluster profile's services: the local Postgres (a fresh database per test session, dropped
afterwards) and Redis (its own db number and queue), checked before anything starts, and Celery
worker processes started and stopped by the tests."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PG_HOST, PG_PORT, PG_USER = "127.0.0.1", 5432, os.environ.get("PGUSER", "postgres")
REDIS_URL = os.environ.get("NL2SQL_TEST_REDIS", "redis://127.0.0.1:6379/13")  # a db number of its own
REPO = Path(__file__).resolve().parents[2]


def require_postgres() -> None:
    import psycopg2

    try:
        psycopg2.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres", connect_timeout=3).close()
    except psycopg2.OperationalError as exc:
        pytest.fail(f"PostgreSQL on {PG_HOST}:{PG_PORT} is down or refuses user {PG_USER}: {exc}", pytrace=False)


def require_redis() -> None:
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3, socket_timeout=3).ping()
    except redis.RedisError as exc:
        pytest.fail(f"Redis at {REDIS_URL} is down: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A fresh Postgres database (its DSN); dropped, with whatever is in it, at the end."""
    import psycopg2

    require_postgres()
    name = f"nl2sql_test_{uuid.uuid4().hex[:12]}"
    con = psycopg2.connect(host=PG_HOST, port=PG_PORT, user=PG_USER, dbname="postgres", connect_timeout=3)
    con.autocommit = True
    con.cursor().execute(f"CREATE DATABASE {name}")
    try:
        yield name
    finally:
        con.cursor().execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        con.close()


def dsn(database: str, port: int = PG_PORT) -> str:
    return f"host={PG_HOST} port={port} dbname={database} user={PG_USER}"


class PgPort:
    """A TCP port in front of the local Postgres that a test closes and opens again: a Postgres
    restart as its clients see it (every connection dropped, new ones refused until it is back),
    without touching the server other tests share. A plain forwarder (threads copying bytes):
    the standard library has none, and a test needs nothing more."""

    def __init__(self, target: tuple[str, int] = (PG_HOST, PG_PORT)) -> None:
        self.target = target
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> PgPort:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.1)
        self._stop.clear()
        self._thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Refuse new connections and drop every open one (what a server restart does to clients)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        with self._lock:
            open_now, self._open = list(self._open), set()
        for sock in open_now:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        with listener:
            while not self._stop.is_set():
                try:
                    client, _ = listener.accept()
                except TimeoutError:
                    continue
                client.settimeout(None)
                try:
                    upstream = socket.create_connection(self.target, timeout=3)
                except OSError:
                    client.close()
                    continue
                upstream.settimeout(None)
                with self._lock:
                    self._open.update((client, upstream))
                if self._stop.is_set():  # stopped while connecting: stop() may have missed this pair
                    for sock in (client, upstream):
                        with contextlib.suppress(OSError):
                            sock.shutdown(socket.SHUT_RDWR)
                    continue
                for src, dst in ((client, upstream), (upstream, client)):
                    threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        for sock in (src, dst):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        with self._lock:
            self._open.discard(src)
        src.close()


@dataclass
class Cluster:
    """The environment of one cluster (the test process is the run orchestrator) and its workers."""

    env: dict[str, str]
    pg_port: PgPort  # the port our tables (NL2SQL_PG_DSN) reach Postgres through; Dagster's storage goes direct
    home: Path
    project: Path
    logs: Path
    workers: dict[str, subprocess.Popen] = field(default_factory=dict)
    dagster_port: PgPort | None = None  # Dagster's storage's port, when it goes through one too

    def start_worker(self, name: str) -> subprocess.Popen:
        log = (self.logs / f"{name}.log").open("a")
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "nl2sql_assets.defs.celery_worker", "worker",
             "-Q", self.env["NL2SQL_CELERY_QUEUE"], "-P", "solo", "-c", "1", "-n", f"{name}@%h",
             "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "INFO"],
            env={**self.env, "NL2SQL_WORKER": name}, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.workers[name] = proc
        return proc

    def wait_ready(self, timeout: float = 60) -> None:
        """Until every worker's log says it is ready (Celery prints 'ready.')."""
        deadline = time.monotonic() + timeout
        for name, proc in self.workers.items():
            while "ready." not in (self.logs / f"{name}.log").read_text(errors="replace"):
                if proc.poll() is not None:
                    pytest.fail(f"worker {name} exited: {(self.logs / f'{name}.log').read_text()[-2000:]}")
                if time.monotonic() > deadline:
                    pytest.fail(f"worker {name} not ready after {timeout} s")
                time.sleep(0.2)

    def kill(self, name: str) -> None:
        proc = self.workers.pop(name)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)

    def stop_all(self) -> None:
        for name in list(self.workers):
            proc = self.workers.pop(name)
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(5)


def with_routing_suite(project: Path) -> None:
    """The demo project evaluating the routing suite beside Chinook (evals.yaml lists Chinook only)."""
    evals = project / "evals.yaml"
    text = evals.read_text(encoding="utf-8")
    assert "- suites/chinook.yaml\n" in text, "the demo's evals.yaml no longer lists suites/chinook.yaml"
    evals.write_text(text.replace("- suites/chinook.yaml\n", "- suites/chinook.yaml\n- suites/routing.yaml\n"),
                     encoding="utf-8")


@pytest.fixture(scope="session")
def routing_template(tmp_path_factory: pytest.TempPathFactory, demo_template: Path) -> Path:
    """The demo project with the routing suite beside Chinook, its neighbours (the routing suite's
    gold reads the two DuckDB datasources too) made once per session for every copy to read back."""
    from tests.conftest import make_neighbours

    project = tmp_path_factory.mktemp("routing-template") / "demo"
    shutil.copytree(demo_template, project)
    with_routing_suite(project)
    make_neighbours(project)
    return project


@contextlib.contextmanager
def open_cluster(root: Path, routing_template: Path, pg_database: str, *, schema: str = "nl2sql",
                 dagster_through_port: bool = False, env_overrides: dict[str, str] | None = None) -> Iterator[Cluster]:
    """A demo project under ``root``, a DAGSTER_HOME on Postgres, the profile's variables, and two
    workers. With ``dagster_through_port`` Dagster's own run and event storage reaches Postgres
    through a second PgPort (``Cluster.dagster_port``), so a test can restart it too;
    ``env_overrides`` replace profile variables (e.g. the visibility timeout)."""
    import redis

    require_redis()
    project = root / "demo"
    shutil.copytree(routing_template, project)  # the routing suite beside Chinook, its neighbours made
    home = root / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "deploy" / "cluster" / "dagster.yaml", home / "dagster.yaml")
    (root / "logs").mkdir()
    queue = f"nl2sql_test_{uuid.uuid4().hex[:8]}"
    pg_port = PgPort().start()
    dagster_port = PgPort().start() if dagster_through_port else None
    env = {
        **os.environ,
        "NL2SQL_PROFILE": "cluster",
        "NL2SQL_PG_DSN": dsn(pg_database, pg_port.port),
        "NL2SQL_PG_SCHEMA": schema,
        "NL2SQL_DAGSTER_PG_URL": dagster_pg_url(pg_database, dagster_port.port if dagster_port else PG_PORT),
        "NL2SQL_CELERY_BROKER": REDIS_URL,
        "NL2SQL_CELERY_BACKEND": REDIS_URL,
        "NL2SQL_CELERY_QUEUE": queue,
        "NL2SQL_CELERY_KEY_PREFIX": f"{queue}:",  # this session's keys only, whoever else uses the db
        "NL2SQL_SHARD_SIZE": "12",
        # A killed worker's step goes back to the queue after this long (every shard here is shorter).
        "NL2SQL_VISIBILITY_TIMEOUT_S": "10",
        "NL2SQL_PROJECT": str(project / "nl2sql.yaml"),
        "DAGSTER_HOME": str(home),
        "PYTHONPATH": str(REPO),
        **(env_overrides or {}),
    }
    saved = dict(os.environ)
    os.environ.update(env)
    c = Cluster(env=env, pg_port=pg_port, home=home, project=project, logs=root / "logs", dagster_port=dagster_port)
    try:
        c.start_worker("w1")
        c.start_worker("w2")
        c.wait_ready()
        yield c
    finally:
        c.stop_all()
        pg_port.stop()
        if dagster_port is not None:
            dagster_port.stop()
        os.environ.clear()
        os.environ.update(saved)
        client = redis.Redis.from_url(REDIS_URL)
        keys = [*client.scan_iter(f"{queue}*"), *client.scan_iter(f"_kombu.binding.{queue}*")]
        if keys:
            client.delete(*keys)


def dagster_pg_url(database: str, port: int = PG_PORT) -> str:
    """Dagster's storage URL with the libpq settings deploy/cluster/dagster.yaml asks for (see
    scripts/cluster): a connect timeout and TCP keepalives, so a restarted server is noticed."""
    return (f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{port}/{database}"
            "?connect_timeout=10&keepalives=1&keepalives_idle=10&keepalives_interval=5&keepalives_count=3")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, routing_template: Path, pg_database: str) -> Iterator[Cluster]:
    """A demo project, a DAGSTER_HOME on Postgres, the profile's variables, and two workers."""
    with open_cluster(tmp_path_factory.mktemp("cluster"), routing_template, pg_database) as c:
        yield c
