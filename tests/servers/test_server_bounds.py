"""Each server's statements are bounded by the server and by the client: a long statement stops at
its timeout (and is cancelled by the client where the server would not stop it), a huge result is
cut at the row limit, a setting a statement changes does not outlive it on the pooled connection,
and a worker holds at most its pool's connections. (The seconds and the memory are measured by
scripts/bench_servers.py, not here.)"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.datasources.base import DatasourceError, QueryTimeout
from nl2sql_assets.datasources.registry import open_adapter
from tests.servers.conftest import Server

#: a statement that runs for minutes on each server
LONG = {
    "postgres": "SELECT COUNT(*) FROM generate_series(1, 100000000000) AS g(n)",
    "mysql": "SELECT COUNT(*) FROM t a, t b, t c, t d, t e, t f, t g, t h, t i, t j, t k, t l, t m, t n, t o, "
             "t p, t q, t r, t s, t u, t v, t w, t x, t y, t z",
}
#: a statement whose result has millions of rows
HUGE = {
    "postgres": "SELECT n FROM generate_series(1, 12000000) AS g(n)",
    "mysql": "SELECT a.n FROM t a, t b, t c, t d, t e, t f, t g, t h, t i, t j, t k, t l, t m, t n, t o, t p, "
             "t q, t r, t s, t u, t v, t w, t x, t y",
}


def _datasource(server: Server, prefix: str, **extra: Any) -> DatasourceConfig:
    namespace = f"{prefix}bounds"
    if server.engine == "postgres":
        server.execute(f'CREATE SCHEMA "{namespace}"', f'CREATE TABLE "{namespace}".t (n INT)',
                       f'INSERT INTO "{namespace}".t VALUES (1), (2)')
        return DatasourceConfig(id="b", engine="postgres", url=server.url, schemas=[namespace], **extra)
    server.execute(f"CREATE DATABASE `{namespace}`", f"CREATE TABLE `{namespace}`.t (n INT)",
                   f"INSERT INTO `{namespace}`.t VALUES (1), (2)")
    return DatasourceConfig(id="b", engine="mysql", url=server.url, database=namespace, **extra)


def test_a_long_statement_stops_at_its_timeout(server: Server, prefix: str) -> None:
    adapter = open_adapter(_datasource(server, prefix))
    try:
        with pytest.raises(QueryTimeout, match="ran past its 1 s timeout"):
            adapter.execute(LONG[server.engine], timeout_s=1)
        assert adapter.execute("SELECT COUNT(*) AS n FROM t").rows == [[2]]  # the connection serves on
    finally:
        adapter.close()


def test_the_client_cancels_a_statement_the_server_does_not_stop(server: Server, prefix: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = open_adapter(_datasource(server, prefix))
    # as if the server ignored its own limit: no server-side timeout is set at all
    if server.engine == "postgres":
        pin = type(adapter)._pin
        monkeypatch.setattr(type(adapter), "_pin", lambda self, cur, timeout: pin(self, cur, 3600))
    else:
        monkeypatch.setattr(type(adapter), "_wrapped", lambda self, statement, timeout: statement)
    try:
        with pytest.raises(QueryTimeout):
            adapter.execute(LONG[server.engine], timeout_s=1)
        assert adapter.execute("SELECT COUNT(*) AS n FROM t").rows == [[2]]
    finally:
        adapter.close()


def test_a_huge_result_is_cut_at_the_row_limit(server: Server, prefix: str) -> None:
    adapter = open_adapter(_datasource(server, prefix, row_limit=1000))
    try:
        out = adapter.execute(HUGE[server.engine], timeout_s=60)
        assert out.truncated and len(out.rows) == 1000
        assert adapter.execute("SELECT COUNT(*) AS n FROM t").rows == [[2]]  # the pool serves on
    finally:
        adapter.close()


def test_a_changed_setting_does_not_outlive_its_statement(server: Server, prefix: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = open_adapter(_datasource(server, prefix, pool_size=1))
    # past the statement checks, as if one had a blind spot: the database's own layers must hold
    monkeypatch.setattr(adapter, "_check", lambda sql: sql) if server.engine == "postgres" else None
    try:
        if server.engine == "postgres":
            adapter.execute("SELECT set_config('statement_timeout', '0', false)")
            with pytest.raises(QueryTimeout):  # the next statement has its own timeout again
                adapter.execute(LONG["postgres"], timeout_s=1)
        else:
            import nl2sql_assets.datasources.mysql as mysql

            monkeypatch.setattr(mysql, "check_server_statement", lambda sql, engine: sql)
            with contextlib.suppress(DatasourceError):  # it may run or fail: either way it must not last
                adapter.execute("SET SESSION sql_mode = 'ANSI_QUOTES'")
            # "x" is still a string, as the statement guard read it (ANSI_QUOTES would make it a column)
            assert adapter.execute('SELECT "x" AS s').rows == [["x"]]
    finally:
        adapter.close()


def test_a_worker_holds_at_most_its_pool(server: Server, prefix: str) -> None:
    import concurrent.futures

    cfg = _datasource(server, prefix, pool_size=2)
    adapter = open_adapter(cfg)
    try:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            results = list(pool.map(lambda _: adapter.execute("SELECT COUNT(*) AS n FROM t").rows, range(40)))
        assert results == [[[2]]] * 40
        assert adapter._pool._made <= 2
    finally:
        adapter.close()
