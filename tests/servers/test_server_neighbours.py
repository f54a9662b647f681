"""Neighbour databases of a server datasource (Postgres, MariaDB), end to end: made in a scratch place
beside the source (a schema each in ``<database>_nl2sql_neighbours`` on Postgres, a database each on
MariaDB), never inside it; near misses the server's own data hides are taken back there or by a witness;
the gold audit runs there; ``neighbours prune`` drops what no suite uses; no password is written down."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

from nl2sql_assets.cli import main
from nl2sql_assets.evaluation.grading import GradeReport
from nl2sql_assets.evaluation.neighbours.servers import PREFIX, ServerFiles, read_handle
from nl2sql_assets.evaluation.suites import load_suite
from tests.servers.conftest import Server, ServerProject


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
    # a set made with other settings, and a namespace a killed build left behind
    old_home = handle.parent.parent / "0123456789abcdef0123"
    old_home.mkdir()
    stray = f"{PREFIX}leftover{server_project.prefix.rstrip('_')}"
    source = files.read(handle, 1)
    files.catalog.make(config, stray, source, {})
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
        code, out, err = _cli("--config", server_demo / "nl2sql.yaml", "neighbours", "prune")
        assert code == 0, out + err
        assert not old_home.exists()
        left = files.catalog.namespaces(config)
        assert stray not in left and other not in left
        assert namespace in left and handle.is_file()  # what the suites use stays
    finally:
        for name in (stray, other):
            files.catalog.drop(config, name)
