"""The cluster profile's services: the local Postgres (a fresh database per test session, dropped
afterwards) and Redis (its own db number and queue), checked before anything starts, and Celery
worker processes started and stopped by the tests."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
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


def dsn(database: str) -> str:
    return f"host={PG_HOST} port={PG_PORT} dbname={database} user={PG_USER}"


@dataclass
class Cluster:
    """The environment of one cluster (the test process is the run orchestrator) and its workers."""

    env: dict[str, str]
    home: Path
    project: Path
    logs: Path
    workers: dict[str, subprocess.Popen] = field(default_factory=dict)

    def start_worker(self, name: str) -> subprocess.Popen:
        log = (self.logs / f"{name}.log").open("a")
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "nl2sql_assets.cluster.worker", "worker",
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


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, demo_template: Path, pg_database: str) -> Iterator[Cluster]:
    """A demo project, a DAGSTER_HOME on Postgres, the profile's variables, and two workers."""
    import redis

    require_redis()
    root = tmp_path_factory.mktemp("cluster")
    project = root / "demo"
    shutil.copytree(demo_template, project)
    home = root / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "deploy" / "cluster" / "dagster.yaml", home / "dagster.yaml")
    (root / "logs").mkdir()
    queue = f"nl2sql_test_{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "NL2SQL_PROFILE": "cluster",
        "NL2SQL_PG_DSN": dsn(pg_database),
        "NL2SQL_PG_SCHEMA": "nl2sql",
        "NL2SQL_DAGSTER_PG_URL": f"postgresql+psycopg2://{PG_USER}@{PG_HOST}:{PG_PORT}/{pg_database}",
        "NL2SQL_CELERY_BROKER": REDIS_URL,
        "NL2SQL_CELERY_BACKEND": REDIS_URL,
        "NL2SQL_CELERY_QUEUE": queue,
        "NL2SQL_SHARD_SIZE": "12",
        # A killed worker's step goes back to the queue after this long (every shard here is shorter).
        "NL2SQL_VISIBILITY_TIMEOUT_S": "10",
        "NL2SQL_PROJECT": str(project / "nl2sql.yaml"),
        "DAGSTER_HOME": str(home),
        "PYTHONPATH": str(REPO),
    }
    saved = dict(os.environ)
    os.environ.update(env)
    c = Cluster(env=env, home=home, project=project, logs=root / "logs")
    try:
        c.start_worker("w1")
        c.start_worker("w2")
        c.wait_ready()
        yield c
    finally:
        c.stop_all()
        os.environ.clear()
        os.environ.update(saved)
        client = redis.Redis.from_url(REDIS_URL)
        keys = [*client.scan_iter(f"{queue}*"), *client.scan_iter("celery-task-meta-*"), b"unacked",
                b"unacked_index", *client.scan_iter("_kombu.*")]
        if keys:
            client.delete(*keys)
