"""``eval run`` graded on neighbour databases, end to end: an engine over HTTP answers the Chinook
suite with its gold SQL, except a few near misses that Chinook itself cannot tell apart. The run
keeps its accuracy on the original and gives the neighbour-robust rate beside it, each overturned
pass with its neighbour and both results; the record carries the neighbour settings and they are
part of its series; the gate reads overturned passes as failures when told to. And the same on a
small generated Spider-format benchmark, with ``eval grade --neighbours`` and ``eval audit``."""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from nl2sql_assets.cli import main
from nl2sql_assets.evaluation.grading import GradeReport
from nl2sql_assets.evaluation.history.records import iter_records
from nl2sql_assets.evaluation.neighbours import GoldQuery, distill, generate_neighbours, gold_literals
from nl2sql_assets.evaluation.reporting import load_report
from nl2sql_assets.evaluation.suites import load_suite
from tests.engine_servers import RecordingEngine

# Mode full runs here against local servers; CI's ``CI`` variable would refuse it.
pytestmark = pytest.mark.usefixtures("outside_ci")


def _run(*argv: Any) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main([str(a) for a in argv])
    return code, out.getvalue()


def near_misses(database: Path, golds: list[GoldQuery], folder: Path, limit: int = 4) -> dict[str, str]:
    """Per gold key, a one-edit mutant that the original does not tell apart and some neighbour
    does (found with the product's own machinery on a pool of the test's own)."""
    pool = generate_neighbours(database, folder, 24, seed=1, literals=gold_literals([g.sql for g in golds]))
    found = distill(golds, database, pool, keep=10, workers=1)
    near: dict[str, str] = {}
    for pairs in found.by_neighbour.values():
        for key, index in sorted(pairs):
            if len(near) < limit:
                near.setdefault(key, found.mutants[key][index].sql)
    return near


def test_a_run_on_neighbours_overturns_near_misses_records_its_series_and_gates(demo_project: Path,
                                                                               tmp_path: Path) -> None:
    suite_path = demo_project / "suites" / "chinook.yaml"
    cases = [c for c in load_suite(suite_path).cases if c.sql and c.kind == "answer"]
    near = near_misses(demo_project / "data" / "chinook.sqlite",
                       [GoldQuery(c.id, c.sql or "", c.order_matters, tuple(c.alt_sql)) for c in cases],
                       tmp_path / "pool")
    assert len(near) == 4
    answers = {c.question: near.get(c.id, c.sql) for c in cases}
    engine = RecordingEngine(answers)  # SQL only: run here, on Chinook and on the kept neighbours
    url = f"http://127.0.0.1:{engine.server_address[1]}"
    config = demo_project / "nl2sql.yaml"
    run = ["--config", config, "eval", "run", "--mode", "full", "--engine", f"vendor={url}", "--suite", suite_path,
           "--roles", "admin"]
    try:
        first = tmp_path / "first.json"
        code, out = _run(*run, "--neighbours", 10, "--out", first)
        assert code == 0, out
        report = load_report(first)
        board = report.configs["vendor"]
        summary = board.summaries()["neighbour_match"]
        # on Chinook alone every answer passes; on the neighbours the near misses do not
        assert board.accuracy.execution.passed == board.accuracy.execution.total
        assert {o.case for o in summary.overturned} == set(near)
        assert summary.robust.passed == summary.questions - len(near)
        assert f"on neighbours {summary.robust.count_text()}, {len(near)} pass(es) overturned" in out
        by_case = {r.case_id: r for r in board.results}
        for key in near:
            record = by_case[key]
            assert record.execution_status == "pass" and record.status == "fail"  # robust only where it holds
            detail = record.scores["neighbour_match"].detail
            assert detail["reason"] == "fails_on_neighbour" and detail["gold_rows"] != detail["predicted_rows"]
            evidence = demo_project / "warehouse" / "neighbours" / "chinook" / detail["neighbour_set"]
            assert (evidence / detail["neighbour"]).is_file()  # the evidence is kept
        assert report.neighbours is not None and report.neighbours.count == 10 and report.neighbours.seed == 1
        (kept,) = report.neighbours.sets
        assert kept.datasource == "chinook" and 1 <= kept.kept <= 10 and kept.separated >= 0.97 * kept.separable

        # recorded with its neighbour settings; the next run of the same settings is comparable
        code, out = _run("--config", config, "eval", "publish", first, "--root", demo_project)
        assert code == 0, out
        ((_, record),) = list(iter_records(demo_project / "benchmarks"))
        assert record.neighbours == report.neighbours
        code, out = _run(*run, "--neighbours", 10, "--out", tmp_path / "again.json", "--baseline",
                         demo_project / "benchmarks")
        assert code == 0 and "gate: ok" in out, out
        # another seed is another set of neighbours: a new series, never compared
        code, out = _run(*run, "--neighbours", 10, "--neighbour-seed", 2, "--out", tmp_path / "seed2.json",
                         "--baseline", demo_project / "benchmarks")
        assert code == 2 and "other neighbour databases" in out, out

        # Three more near misses: each passes on Chinook, so on the original nothing flips; read on
        # the neighbours (gate verdict: neighbours) three cases flip, more than the two allowed.
        more = {k: v for k, v in near_misses(demo_project / "data" / "chinook.sqlite",
                                             [GoldQuery(c.id, c.sql or "", c.order_matters, tuple(c.alt_sql))
                                              for c in cases if c.id not in near],
                                             tmp_path / "pool2", limit=3).items()}
        assert len(more) == 3
        for c in cases:
            if c.id in more:
                engine.answers[c.question] = more[c.id]
        code, out = _run(*run, "--neighbours", 10, "--out", tmp_path / "worse.json", "--baseline",
                         demo_project / "benchmarks")
        assert code == 0 and "gate: ok" in out, out  # on the original: nothing lost
        evals = demo_project / "evals.yaml"
        data = yaml.safe_load(evals.read_text(encoding="utf-8"))
        data["gate"] = {**data.get("gate", {}), "verdict": "neighbours"}
        evals.write_text(yaml.safe_dump(data), encoding="utf-8")
        code, out = _run(*run, "--neighbours", 10, "--out", tmp_path / "worse2.json", "--baseline",
                         demo_project / "benchmarks")
        assert code == 1, out
        assert "on neighbours): 3 case(s) went from pass to fail" in out
        assert all(f"{key}@admin" in out for key in more)
    finally:
        engine.shutdown()
        engine.server_close()


# ---------------------------------------------------------------- a small generated benchmark

TABLES = [{
    "db_id": "concerts",
    "table_names_original": ["singer", "concert", "singer_in_concert"],
    "column_names_original": [[-1, "*"], [0, "singer_id"], [0, "name"], [0, "country"], [0, "age"],
                              [1, "concert_id"], [1, "concert_name"], [1, "year"],
                              [2, "concert_id"], [2, "singer_id"]],
    "column_types": ["text", "number", "text", "text", "number", "number", "text", "number", "number", "number"],
    "primary_keys": [1, 5],
    "foreign_keys": [[8, 5], [9, 1]],
}]

QUESTIONS = [
    ("How many singers are older than 40?", "SELECT count(*) FROM singer WHERE age > 40"),
    ("Names of singers from France, by name.", "SELECT name FROM singer WHERE country = 'France' ORDER BY name"),
    ("How many concerts were held in 2014 or later?", "SELECT count(*) FROM concert WHERE year >= 2014"),
    ("Concert names with how many singers each.",
     "SELECT T1.concert_name, count(*) FROM concert AS T1 JOIN singer_in_concert AS T2 "
     "ON T1.concert_id = T2.concert_id GROUP BY T1.concert_id"),
    ("Distinct countries of singers.", "SELECT DISTINCT country FROM singer"),
    ("The oldest singer's name.", "SELECT name FROM singer ORDER BY age DESC LIMIT 1"),
]


def test_a_generated_benchmark_graded_and_run_on_neighbours_and_audited(tmp_path: Path) -> None:
    from nl2sql_assets.public_benchmarks.synthetic import build_databases

    folder = tmp_path / "spider"
    folder.mkdir()
    (folder / "tables.json").write_text(json.dumps(TABLES), encoding="utf-8")
    (folder / "dev.json").write_text(json.dumps([{"db_id": "concerts", "question": q, "query": s,
                                                  "query_toks": s.split()} for q, s in QUESTIONS]), encoding="utf-8")
    build_databases(folder / "tables.json", folder, rows=30, seed=4)
    project = tmp_path / "project"
    code, out = _run("bench", "import", "spider", folder, "--out", project, "--approve")
    assert code == 0, out
    suite_path = project / "suites" / "spider_dev.yaml"
    suite = load_suite(suite_path)
    database = Path(next(iter(yaml.safe_load((project / "nl2sql.yaml").read_text())["datasources"]))["path"])
    database = database if database.is_absolute() else project / database
    cases = [c for c in suite.cases if c.sql]
    near = near_misses(database, [GoldQuery(c.id, c.sql or "", c.order_matters, tuple(c.alt_sql)) for c in cases],
                       tmp_path / "pool", limit=2)
    assert near, "the generated rows hide no near miss: the test needs one"
    predictions = {c.id: near.get(c.id, c.sql) for c in cases}
    predicted = tmp_path / "predictions.json"
    predicted.write_text(json.dumps(predictions), encoding="utf-8")

    graded = tmp_path / "grade.json"
    code, out = _run("--config", project / "nl2sql.yaml", "eval", "grade", predicted, "--suite", suite_path,
                     "--neighbours", 6, "--out", graded)
    assert code == 0, out
    grade = GradeReport.model_validate_json(graded.read_text(encoding="utf-8"))
    assert grade.execution.passed == len(cases)
    assert {g.case_id for g in grade.cases if g.overturned_on} == set(near)

    engine = RecordingEngine({c.question: predictions[c.id] for c in cases})
    try:
        code, out = _run("--config", project / "nl2sql.yaml", "eval", "run", "--mode", "full", "--engine",
                         f"model=http://127.0.0.1:{engine.server_address[1]}", "--neighbours", 6,
                         "--out", tmp_path / "run.json")
        assert code == 0, out
    finally:
        engine.shutdown()
        engine.server_close()
    board = load_report(tmp_path / "run.json").configs["model"]
    assert {o.case for o in board.summaries()["neighbour_match"].overturned} == set(near)

    audit = tmp_path / "audit.json"
    code, out = _run("--config", project / "nl2sql.yaml", "eval", "audit", suite_path, "--neighbours", 6,
                     "--out", audit, "--strict")
    flags = json.loads(audit.read_text(encoding="utf-8"))["flags"]
    assert code == (1 if flags else 0), out
    oldest = next(c.id for c in cases if "LIMIT 1" in (c.sql or ""))
    ages = _column(database, "SELECT age FROM singer WHERE age IS NOT NULL ORDER BY age DESC LIMIT 2")
    if ages[0] == ages[1]:  # two singers share the oldest age: the gold's LIMIT 1 picks one of a tie
        assert {"case": oldest, "kind": "order_sensitive"}.items() <= next(
            f for f in flags if f["case"] == oldest).items()


def _column(path: Path, sql: str) -> list[Any]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return [r[0] for r in conn.execute(sql)]
    finally:
        conn.close()
