"""The Dagster graph on the demo on a server (``pipeline run``): snapshots from the server's catalog,
suites, rows, case runs and boards, with the URL, which carries a password, given to Dagster as an
EnvVar: the run's config and every file of the instance name the variable, never the password."""

from __future__ import annotations

import contextlib
import io
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dagster as dg
import pytest

from nl2sql_assets.cli import main
from tests.servers.conftest import server_of, small_neighbours


def _cli(*argv: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def test_pipeline_run_on_postgres_with_the_url_from_the_environment(tmp_path: Path, chinook_path: Path,
                                                                    dagster_home: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from nl2sql_assets.defs.factory import build_defs
    from nl2sql_assets.demo import init_demo

    server = server_of("postgres")
    parts = urlsplit(server.url)
    secret = "Tr0ub4dor-" + uuid.uuid4().hex[:8]  # the server trusts the host: any password logs in
    url = f"{parts.scheme}://{parts.username}:{secret}@{parts.hostname}:{parts.port}{parts.path}"
    prefix = f"p{uuid.uuid4().hex[:10]}_"
    root = tmp_path / "demo"
    try:
        made = init_demo(root, chinook=chinook_path, database=url, namespace_prefix=prefix)
        assert made.server is not None and made.server.export == f"export NL2SQL_DATABASE_URL='{url}'"
        text = (root / "nl2sql.yaml").read_text(encoding="utf-8")
        assert "url_env: NL2SQL_DATABASE_URL" in text and secret not in text
        monkeypatch.setenv("NL2SQL_DATABASE_URL", url)
        small_neighbours(root)  # the pipeline makes the server's neighbours too: few and small here
        # Dagster takes the URL as an EnvVar: the resource's config names the variable
        defs = build_defs(root / "nl2sql.yaml")
        (variable,) = defs.resources["project"].secrets.values.values()
        assert isinstance(variable, dg.EnvVar) and variable == "NL2SQL_DATABASE_URL"

        code, out, err = _cli("--config", root / "nl2sql.yaml", "pipeline", "run")
        assert code == 0, out + err
        assert "scoreboard chinook/plans: execution accuracy 100.0% (141/141" in out
        assert "FAILED" not in out
        leaked = [p for p in [*root.rglob("*"), *dagster_home.rglob("*")] if p.is_file()
                  and secret.encode() in p.read_bytes()]
        assert leaked == []
        assert secret not in out + err
    finally:
        for ds in ("chinook", "support", "webanalytics"):
            server.drop(f"{prefix}{ds}")
