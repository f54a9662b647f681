"""Bad server settings and failing servers, as a user meets them on the command line: one clear
error before any run starts (the datasource, host and port, never the password, and the fix; exit
2, no traceback); a server that goes away mid-run makes the rest environment errors (exit 4) with
the records so far kept; and a password reaches no file the project writes, nor the output."""

from __future__ import annotations

import contextlib
import io
import re
import socket
import threading
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from nl2sql_assets.cli import main
from nl2sql_assets.evaluation.reporting.board import load_report
from tests.servers.conftest import ServerProject


def _cli(*argv: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def _with_url(root: Path, **fields: str) -> None:
    """The project's datasources rewritten to read the server through other settings."""
    text = (root / "nl2sql.yaml").read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not re.match(r"  (url|url_env|password_env): ", line)]
    extra = "".join(f"  {k}: {v}\n" for k, v in fields.items())
    text = "\n".join(lines) + "\n"
    text = re.sub(r"(  engine: (postgres|mysql)\n)", lambda m: m.group(1) + extra, text)
    (root / "nl2sql.yaml").write_text(text, encoding="utf-8")


def _run(root: Path, tmp_path: Path) -> tuple[int, str, str]:
    return _cli("--config", root / "nl2sql.yaml", "eval", "run", "--mode", "plans", "--suite",
                root / "suites" / "chinook.yaml", "--no-neighbours", "--out", tmp_path / "run.json")


def test_a_password_in_the_file_is_refused_with_the_fix(server_demo: Path, tmp_path: Path,
                                                        server_project: ServerProject) -> None:
    scheme, rest = server_project.server.url.split("://", 1)
    user, host = rest.split("@", 1)
    _with_url(server_demo, url=f"{scheme}://{user}:hunter2-secret@{host}")
    code, out, err = _run(server_demo, tmp_path)
    assert code == 2, out + err
    assert "url: " in err and "carries a password" in err and "url_env" in err and "password_env" in err
    assert "hunter2-secret" not in out + err
    assert "Traceback" not in err


def test_an_unset_url_variable_is_named(server_demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NL2SQL_NO_SUCH_URL", raising=False)
    _with_url(server_demo, url_env="NL2SQL_NO_SUCH_URL")
    code, out, err = _run(server_demo, tmp_path)
    assert code == 2, out + err
    assert "datasource 'chinook'" in err and "NL2SQL_NO_SUCH_URL" in err and "export NL2SQL_NO_SUCH_URL=" in err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("problem", ["unreachable", "login", "namespace"])
def test_a_server_that_cannot_serve_is_one_clear_error_before_the_run(
        server_demo: Path, tmp_path: Path, server_project: ServerProject, problem: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    server = server_project.server
    parts = urlsplit(server.url)
    secret = "Pa55-" + uuid.uuid4().hex[:8]
    if problem == "unreachable":
        port = _free_port()
        url = f"{parts.scheme}://{parts.username}:{secret}@127.0.0.1:{port}{parts.path}"
        expected = [f"127.0.0.1:{port}", "cannot connect"]
    elif problem == "login":
        url = f"{parts.scheme}://nl2sql_nobody:{secret}@{parts.hostname}:{parts.port}{parts.path}"
        expected = [f"{parts.hostname}:{parts.port}", "nl2sql_nobody"]
    else:
        url = server.url
        text = (server_demo / "nl2sql.yaml").read_text(encoding="utf-8")
        (server_demo / "nl2sql.yaml").write_text(text.replace(f"{server_project.prefix}chinook",
                                                              "nl2sql_no_such_place"), encoding="utf-8")
        expected = ["nl2sql_no_such_place"]
    monkeypatch.setenv("NL2SQL_TEST_URL", url)
    _with_url(server_demo, url_env="NL2SQL_TEST_URL")
    code, out, err = _run(server_demo, tmp_path)
    assert code == 2, out + err
    assert "datasource 'chinook'" in err, err
    for fragment in expected:
        assert fragment in err, err
    assert secret not in out + err and "Traceback" not in err
    assert not (tmp_path / "run.json").exists()  # nothing ran


def test_a_password_reaches_no_file_and_no_output(server_demo: Path, tmp_path: Path,
                                                  server_project: ServerProject,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    server = server_project.server
    parts = urlsplit(server.url)
    secret = "Sw0rdfish-" + uuid.uuid4().hex[:10]
    user = f"nl2sql_t{uuid.uuid4().hex[:8]}"
    ns = server_project.prefix
    if server.engine == "postgres":
        server.execute(f"CREATE ROLE {user} LOGIN PASSWORD '{secret}'",
                       *(f'GRANT USAGE ON SCHEMA "{ns}{d}" TO {user}' for d in ("chinook", "support", "webanalytics")),
                       *(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{ns}{d}" TO {user}'
                         for d in ("chinook", "support", "webanalytics")))
    else:
        server.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY '{secret}'",
                       f"CREATE USER '{user}'@'localhost' IDENTIFIED BY '{secret}'",
                       *(f"GRANT SELECT ON `{ns}{d}`.* TO '{user}'@'{h}'" for d in ("chinook", "support", "webanalytics")
                         for h in ("%", "localhost")))
    try:
        monkeypatch.setenv("NL2SQL_TEST_PASSWORD", secret)
        _with_url(server_demo, url=f"{parts.scheme}://{user}@{parts.hostname}:{parts.port}{parts.path}",
                  password_env="NL2SQL_TEST_PASSWORD")
        # a read-only role may not make neighbour databases: said, with the grant that would let it
        code, out0, err0 = _cli("--config", server_demo / "nl2sql.yaml", "eval", "run", "--mode", "plans",
                                "--suite", server_demo / "suites" / "chinook.yaml", "--neighbours", 3,
                                "--neighbour-seed", 7, "--out", server_demo / "refused.json")
        assert code == 2, out0 + err0
        assert "may not make its neighbour databases" in err0 and "GRANT" in err0 and "--no-neighbours" in err0
        assert secret not in out0 + err0
        code, out, err = _cli("--config", server_demo / "nl2sql.yaml", "eval", "run", "--mode", "plans",
                              "--no-neighbours", "--out", server_demo / "eval_plans.json")
        assert code == 0, out + err
        assert load_report(server_demo / "eval_plans.json").databases  # it ran, reading the server
        # a read-only role: no warning that the login could write
        assert "could change data" not in err
        code, out2, err2 = _cli("--config", server_demo / "nl2sql.yaml", "eval", "publish",
                                server_demo / "eval_plans.json", "--root", server_demo)
        assert code == 0, out2 + err2
        written = [p for p in server_demo.rglob("*") if p.is_file()]
        assert len(written) > 5
        assert [p for p in written if secret.encode() in p.read_bytes()] == []
        assert secret not in out + err + out2 + err2 + out0 + err0
    finally:
        if server.engine == "postgres":
            server.execute(*(f'REVOKE ALL ON ALL TABLES IN SCHEMA "{ns}{d}" FROM {user}'
                             for d in ("chinook", "support", "webanalytics")),
                           *(f'REVOKE USAGE ON SCHEMA "{ns}{d}" FROM {user}' for d in ("chinook", "support", "webanalytics")),
                           f"DROP ROLE {user}")
        else:
            server.execute(f"DROP USER '{user}'@'%'", f"DROP USER '{user}'@'localhost'")


class CuttingProxy:
    """A TCP proxy to the server that cuts every connection, and refuses new ones, once ``budget``
    bytes have gone from the client to the server: the server going away mid-run."""

    def __init__(self, host: str, port: int, budget: int) -> None:
        self.target = (host, port)
        self.budget = budget
        self.sent = 0
        self.cut = threading.Event()
        self.sockets: list[socket.socket] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.cut.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.cut.is_set():
                client.close()
                return
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.sockets += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, counted: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if counted:
                    with self.lock:
                        self.sent += len(data)
                        over = self.sent > self.budget
                    if over:
                        self.close()
                        return
                sink.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        self.cut.set()
        with contextlib.suppress(OSError):
            self.listener.close()
        with self.lock:
            for s in self.sockets:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                    s.close()


def test_a_server_that_goes_away_mid_run_is_an_outage_not_a_verdict(server_demo: Path, tmp_path: Path,
                                                                     server_project: ServerProject) -> None:
    parts = urlsplit(server_project.server.url)
    proxy = CuttingProxy(parts.hostname or "127.0.0.1", parts.port or 0, budget=20_000)
    try:
        _with_url(server_demo, url=f"{parts.scheme}://{parts.username}@127.0.0.1:{proxy.port}{parts.path}")
        out_file = tmp_path / "run.json"
        code, out, err = _cli("--config", server_demo / "nl2sql.yaml", "eval", "run", "--mode", "plans",
                              "--suite", server_demo / "suites" / "chinook.yaml", "--no-neighbours",
                              "--out", out_file)
    finally:
        proxy.close()
    assert proxy.cut.is_set()
    assert code == 4, out + err
    report = load_report(out_file)
    assert report.incomplete and report.env_errors.get("database", 0) > 0
    board = report.configs["plans"]
    kept = [r for r in board.results if r.env_error is None]
    outage = [r for r in board.results if r.env_error == "database"]
    assert kept and all(r.status == "pass" for r in kept)  # what ran before the cut is kept, and right
    assert outage and sum(board.env_errors.values()) == len(outage)
    assert board.accuracy.execution.total == len([r for r in kept if r.execution_status is not None])  # no verdict
    assert "the connection failed" in out + err or "cannot connect" in out + err
