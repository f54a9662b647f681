"""``bench import spider|bird`` and ``eval grade`` on small benchmark folders built from Chinook and
the demo's support database (converted to SQLite: both benchmark formats hold SQLite files only)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from nl2sql_assets.cli import main
from nl2sql_assets.config import DatasourceConfig, load_config
from nl2sql_assets.evaluation.grading import PredictionsError, gradable_cases, grade, read_predictions
from nl2sql_assets.evaluation.suites.jsonl import ImportContext, export_jsonl, import_jsonl
from nl2sql_assets.evaluation.suites.loader import load_suite
from nl2sql_assets.public_benchmarks import BenchmarkFolderError, import_benchmark

SPIDER_QUESTIONS = [
    ("chinook", "How many artists are there?", "SELECT COUNT(*) FROM Artist"),
    ("chinook", "List the genre names in alphabetical order.", "SELECT Name FROM Genre ORDER BY Name"),
    ("support", "How many tickets are there per priority?",
     "SELECT priority, COUNT(*) AS n FROM tickets GROUP BY priority"),
    ("chinook", "Show three album titles with their artist's name twice.",
     "SELECT T1.Title, T2.Name, T2.Name FROM Album AS T1 JOIN Artist AS T2 ON T1.ArtistId = T2.ArtistId "
     "ORDER BY T1.AlbumId LIMIT 3"),
    ("support", "How many agents work in each team?", "SELECT team, COUNT(*) FROM agents GROUP BY team"),
]


def _duckdb_to_sqlite(source: Path, target: Path) -> None:
    """Copy every table of a DuckDB file into a new SQLite file (values as the adapters normalise them)."""
    import duckdb

    from nl2sql_assets.datasources.values import normalise_rows

    target.parent.mkdir(parents=True, exist_ok=True)
    src = duckdb.connect(str(source), read_only=True)
    dst = sqlite3.connect(target)
    try:
        for (table,) in src.execute("SELECT table_name FROM information_schema.tables ORDER BY 1").fetchall():
            cursor = src.execute(f'SELECT * FROM "{table}"')
            columns = [d[0] for d in cursor.description]
            dst.execute(f'CREATE TABLE "{table}" ({", ".join(f"{c!r}" for c in columns)})')
            dst.executemany(f'INSERT INTO "{table}" VALUES ({", ".join("?" * len(columns))})',
                            normalise_rows(cursor.fetchall()))
        dst.commit()
    finally:
        src.close()
        dst.close()


@pytest.fixture(scope="module")
def databases(tmp_path_factory: pytest.TempPathFactory, chinook_path: Path, demo_template: Path) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("bench-dbs")
    support = folder / "support.sqlite"
    _duckdb_to_sqlite(demo_template / "data" / "support.duckdb", support)
    return {"chinook": chinook_path, "support": support}


def _spider_folder(root: Path, databases: dict[str, Path], questions: list[tuple[str, str, str]] | None = None
                   ) -> Path:
    for db_id, path in databases.items():
        target = root / "database" / db_id / f"{db_id}.sqlite"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    (root / "tables.json").write_text(json.dumps([{"db_id": d, "table_names_original": []} for d in databases]))
    entries = [{"db_id": d, "question": q, "query": s, "query_toks": s.split()}
               for d, q, s in (questions or SPIDER_QUESTIONS)]
    (root / "dev.json").write_text(json.dumps(entries))
    return root


BIRD_QUESTIONS = [
    {"question_id": 0, "db_id": "chinook", "question": "How many tracks are longer than five minutes?",
     "evidence": "longer than five minutes refers to Milliseconds > 300000",
     "SQL": "SELECT COUNT(*) FROM Track WHERE Milliseconds > 300000", "difficulty": "simple"},
    {"question_id": 1, "db_id": "support", "question": "Which team has the most agents?",
     "evidence": "", "SQL": "SELECT team FROM agents GROUP BY team ORDER BY COUNT(*) DESC LIMIT 1",
     "difficulty": "moderate"},
    {"question_id": 2, "db_id": "chinook", "question": "What share of invoices were billed in the USA?",
     "evidence": "share = COUNT(BillingCountry = 'USA') / COUNT(InvoiceId)",
     "SQL": "SELECT CAST(SUM(IIF(BillingCountry = 'USA', 1, 0)) AS REAL) * 100 / COUNT(InvoiceId) FROM Invoice",
     "difficulty": "challenging"},
]


def _bird_folder(root: Path, databases: dict[str, Path]) -> Path:
    for db_id, path in databases.items():
        target = root / "dev_databases" / db_id / f"{db_id}.sqlite"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
    (root / "dev.json").write_text(json.dumps(BIRD_QUESTIONS))
    return root


def _rows(path: Path, sql: str) -> list[list[Any]]:
    with sqlite3.connect(path) as conn:
        return [list(r) for r in conn.execute(sql).fetchall()]


# ---------------------------------------------------------------- import


def test_spider_import_writes_a_project_and_draft_cases_with_their_gold_rows(tmp_path: Path,
                                                                             databases: dict[str, Path]) -> None:
    folder = _spider_folder(tmp_path / "spider", databases)
    report = import_benchmark("spider", folder, tmp_path / "project")

    config = load_config(report.config)
    assert sorted(ds.id for ds in config.datasources) == ["chinook", "support"]
    assert all(ds.engine == "sqlite" and ds.path.is_file() for ds in config.datasources)
    assert config.evals_config.suites == [report.suite.resolve()]
    suite = load_suite(report.suite)
    assert suite.name == "spider_dev"
    assert [c.question for c in suite.cases] == [q for _, q, _ in SPIDER_QUESTIONS]
    for index, case in enumerate(suite.cases):
        assert (case.status, case.origin) == ("draft", "imported")
        assert case.benchmark is not None
        assert (case.benchmark.name, case.benchmark.split, case.benchmark.index) == ("spider", "dev", index)
        assert case.datasources == [SPIDER_QUESTIONS[index][0]]
    assert [c.order_matters for c in suite.cases] == [False, True, False, True, False]
    # Rows come from the gold SQL, as the database returns them.
    genre = folder / "database" / "chinook" / "chinook.sqlite"
    assert [list(r.values()) for r in suite.cases[1].rows] == _rows(genre, SPIDER_QUESTIONS[1][2])
    support = folder / "database" / "support" / "support.sqlite"
    got = sorted(tuple(r.values()) for r in suite.cases[2].rows)
    assert got == sorted(tuple(r) for r in _rows(support, SPIDER_QUESTIONS[2][2])) and got
    # Two columns of one name (T2.Name twice) are both kept, in order, so no case is lost.
    assert report.with_rows == 5 and report.failed == []
    assert [list(r) for r in suite.cases[3].rows] == [["Title", "Name", "Name (2)"]] * 3
    assert [list(r.values()) for r in suite.cases[3].rows] == _rows(genre, SPIDER_QUESTIONS[3][2])


def test_bird_import_keeps_evidence_as_context_and_the_difficulty(tmp_path: Path,
                                                                 databases: dict[str, Path]) -> None:
    report = import_benchmark("bird", _bird_folder(tmp_path / "bird", databases), tmp_path / "project")
    suite = load_suite(report.suite)
    assert report.failed == [] and report.with_rows == 3
    first, second, _ = suite.cases
    assert first.context == "longer than five minutes refers to Milliseconds > 300000"
    assert second.context is None  # an empty evidence is no context
    assert [c.difficulty for c in suite.cases] == ["easy", "medium", "hard"]
    assert [c.benchmark.difficulty for c in suite.cases] == ["simple", "moderate", "challenging"]
    assert [c.benchmark.question_id for c in suite.cases] == [0, 1, 2]
    assert not any(c.order_matters for c in suite.cases)  # BIRD's grader compares sets
    assert "context: longer than five minutes" in report.suite.read_text()
    # A JSONL export carries context and benchmark, and imports back to the same cases.
    jsonl = tmp_path / "bird.jsonl"
    export_jsonl(report.suite, jsonl)
    config = load_config(report.config)
    again = import_jsonl(jsonl, tmp_path / "again.yaml",
                         ImportContext(roles=["benchmark"], database=None,
                                       datasources={ds.id: ds.path for ds in config.datasources}))
    assert load_suite(again.path).cases == suite.cases


@pytest.mark.parametrize(("mutate", "expected"), [
    (lambda root: (root / "dev.json").write_text(json.dumps([{"db_id": "chinook", "question": "q"}])),
     "dev.json: entry 0: field 'query': missing"),
    (lambda root: (root / "dev.json").write_text('[{"db_id": "chinook",'), "dev.json, line 1, column 22: not JSON"),
    (lambda root: (root / "dev.json").write_text('{"db_id": "chinook"}'), "dev.json: the questions file is a JSON list"),
    (lambda root: (root / "dev.json").write_text(json.dumps([{"db_id": "nowhere", "question": "q", "query": "x"}])),
     "dev.json: entry 0: field 'db_id': database 'nowhere' is not listed in"),
    (lambda root: (root / "database" / "support" / "support.sqlite").unlink(),
     "entry 2: field 'db_id': no database file"),
    (lambda root: (root / "tables.json").unlink(), "spider: the schema list (dev_tables.json or tables.json) not found"),
    (lambda root: (root / "tables.json").write_text('[{"tables": []}]'), "tables.json: entry 0: field 'db_id'"),
])
def test_a_malformed_spider_folder_is_refused_naming_file_entry_and_field(
        tmp_path: Path, databases: dict[str, Path], mutate: Any, expected: str) -> None:
    folder = _spider_folder(tmp_path / "spider", databases)
    mutate(folder)
    with pytest.raises(BenchmarkFolderError) as exc:
        import_benchmark("spider", folder, tmp_path / "project")
    assert expected in str(exc.value)
    assert not (tmp_path / "project").exists()  # nothing written


def test_a_bird_entry_without_sql_names_the_benchmarks_own_key(tmp_path: Path, databases: dict[str, Path]) -> None:
    folder = _bird_folder(tmp_path / "bird", databases)
    broken = [dict(BIRD_QUESTIONS[0]), {k: v for k, v in BIRD_QUESTIONS[1].items() if k != "SQL"}]
    (folder / "dev.json").write_text(json.dumps(broken))
    with pytest.raises(BenchmarkFolderError, match=r"dev.json: entry 1 \(question_id 1\): field 'SQL': missing"):
        import_benchmark("bird", folder, tmp_path / "project")


def test_spider_test_split_reads_its_own_databases_and_schema_list(tmp_path: Path,
                                                                  databases: dict[str, Path]) -> None:
    folder = _spider_folder(tmp_path / "spider", databases)
    (folder / "database").rename(folder / "test_database")
    (folder / "tables.json").rename(folder / "test_tables.json")
    (folder / "dev.json").rename(folder / "test.json")
    report = import_benchmark("spider", folder, tmp_path / "project", questions="test.json")
    assert (report.split, report.suite.name, report.cases, report.with_rows) == ("test", "spider_test.yaml", 5, 5)
    assert all(ds.path.parent.parent.name == "test_database" for ds in load_config(report.config).datasources)


def test_import_never_overwrites_a_project_it_did_not_write(tmp_path: Path, databases: dict[str, Path]) -> None:
    from nl2sql_assets.errors import RunRefused

    folder = _spider_folder(tmp_path / "spider", databases)
    project = tmp_path / "project"
    project.mkdir()
    (project / "nl2sql.yaml").write_text("datasources: []\n")
    with pytest.raises(RunRefused, match="no benchmark import wrote"):
        import_benchmark("spider", folder, project)
    assert (project / "nl2sql.yaml").read_text() == "datasources: []\n"
    again = import_benchmark("spider", folder, tmp_path / "fresh")
    assert import_benchmark("spider", folder, tmp_path / "fresh").suite == again.suite  # its own: rewritten


# ---------------------------------------------------------------- grading


def _spider_project(tmp_path: Path, databases: dict[str, Path]) -> tuple[Path, Path]:
    report = import_benchmark("spider", _spider_folder(tmp_path / "spider", databases), tmp_path / "project")
    return report.config, report.suite


def test_eval_grade_scores_spider_text_predictions_strict_and_lenient(tmp_path: Path, databases: dict[str, Path],
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    config, suite = _spider_project(tmp_path, databases)
    predictions = tmp_path / "pred.txt"
    predictions.write_text("\n".join([
        "SELECT COUNT(ArtistId) FROM Artist\tchinook",  # right
        "SELECT Name FROM Genre ORDER BY Name DESC",  # the right rows in the wrong order
        "SELECT COUNT(*) AS n, priority FROM tickets GROUP BY priority",  # columns swapped: lenient only
        "SELECT T1.Title, T2.Name, T2.Name FROM Album AS T1 JOIN Artist AS T2 ON T1.ArtistId = T2.ArtistId "
        "ORDER BY T1.AlbumId LIMIT 3",  # right; its gold has no stored rows and runs live
        "SELECT team, COUNT(*) FROM agent GROUP BY team",  # no such table
    ]) + "\n")
    out = tmp_path / "grade.json"
    code = main(["--config", str(config), "eval", "grade", str(predictions), "--suite", str(suite), "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert "execution match strict 40.0% (2/5" in printed and "lenient 60.0% (3/5" in printed
    report = json.loads(out.read_text())
    verdicts = {c["case_id"]: (c["strict"]["passed"], c["strict"]["reason"], c["lenient"]["passed"])
                for c in report["cases"]}
    assert verdicts["spider_dev_0000"] == (True, "match", True)
    assert verdicts["spider_dev_0001"] == (False, "order_differs", False)
    assert verdicts["spider_dev_0002"][0::2] == (False, True)  # strict compares columns by position
    assert verdicts["spider_dev_0003"] == (True, "match", True)
    assert verdicts["spider_dev_0004"] == (False, "execution_error", False)
    assert report["errors"] == {"EXECUTION_ERROR": 1}
    assert report["execution"]["low"] < 0.4 < report["execution"]["high"]


def test_eval_grade_reads_bird_json_by_question_id_with_per_difficulty_rates(tmp_path: Path,
                                                                             databases: dict[str, Path]) -> None:
    report = import_benchmark("bird", _bird_folder(tmp_path / "bird", databases), tmp_path / "project")
    suite = load_suite(report.suite)
    cases = gradable_cases(suite)
    file = tmp_path / "predict_dev.json"
    file.write_text(json.dumps({
        "0": "SELECT COUNT(TrackId) FROM Track WHERE Milliseconds > 300000\t----- bird -----\tchinook",
        "1": "SELECT team FROM agents GROUP BY team ORDER BY COUNT(*) ASC LIMIT 1\t----- bird -----\tsupport",
    }))
    predictions = read_predictions(file, cases)
    assert predictions["bird_dev_0000"].endswith("> 300000")
    configs = {ds.id: ds for ds in load_config(report.config).datasources}
    graded = grade(suite, predictions, configs, workers=1)
    assert graded.execution.passed == 1 and graded.graded == 3
    assert set(graded.by_difficulty) == {"simple", "moderate", "challenging"}
    assert graded.by_difficulty["simple"].strict.passed == 1
    assert graded.by_difficulty["challenging"].strict.total == 1
    missing = next(g for g in graded.cases if g.case_id == "bird_dev_0002")
    assert (missing.strict.reason, missing.error_code) == ("no_prediction", "NO_PREDICTION")


def test_predictions_that_do_not_fit_the_suite_are_refused_with_file_and_line(tmp_path: Path,
                                                                              databases: dict[str, Path]) -> None:
    _, suite_path = _spider_project(tmp_path, databases)
    cases = gradable_cases(load_suite(suite_path))
    short = tmp_path / "short.txt"
    short.write_text("SELECT 1\nSELECT 2\n")
    with pytest.raises(PredictionsError, match=r"short.txt: 2 line\(s\), but the suite has 5 gradable case"):
        read_predictions(short, cases)
    wrong_db = tmp_path / "wrong_db.txt"
    wrong_db.write_text("SELECT 1\tchinook\nSELECT 2\tsupport\n" + "SELECT 3\n" * 3)
    with pytest.raises(PredictionsError, match=r"wrong_db.txt, line 2: db id 'support', but case spider_dev_0001"):
        read_predictions(wrong_db, cases)
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"spider_dev_0000": "SELECT 1", "nope": "SELECT 2", "spider_dev_0001": 3}))
    with pytest.raises(PredictionsError) as exc:
        read_predictions(unknown, cases)
    assert "unknown.json: key 'nope': no gradable case" in str(exc.value)
    assert "key 'spider_dev_0001': the prediction is a string of SQL, not a int" in str(exc.value)


def test_grading_runs_read_only_under_the_row_limit_and_a_real_timeout(tmp_path: Path, chinook_path: Path) -> None:
    db = tmp_path / "chinook.sqlite"
    shutil.copy(chinook_path, db)
    before = db.read_bytes()
    folder = tmp_path / "spider"
    questions = [("chinook", "How many artists?", "SELECT COUNT(*) FROM Artist")] * 4
    report = import_benchmark("spider", _spider_folder(folder, {"chinook": db}, questions), tmp_path / "project",
                              row_limit=50, timeout_s=0.5)
    suite = load_suite(report.suite)
    configs = {ds.id: ds for ds in load_config(report.config).datasources}
    ids = [c.id for c in suite.cases]
    predictions = {
        ids[0]: "DELETE FROM Artist",
        ids[1]: "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT COUNT(*) FROM n",
        ids[2]: "SELECT ArtistId FROM Artist",  # 275 rows, cut at 50
        ids[3]: "SELECT COUNT(*) FROM Artist",
    }
    graded = grade(suite, predictions, configs, workers=1)
    codes = {g.case_id: g.error_code for g in graded.cases}
    assert codes == {ids[0]: "READ_ONLY_VIOLATION", ids[1]: "TIMEOUT", ids[2]: "ROW_LIMIT", ids[3]: None}
    timed = next(g for g in graded.cases if g.case_id == ids[1])
    assert 400 <= timed.elapsed_ms < 5000
    copied = folder / "database" / "chinook" / "chinook.sqlite"
    assert _rows(copied, "SELECT COUNT(*) FROM Artist") == [[275]]
    assert db.read_bytes() == before


def test_the_worker_pool_gives_the_same_verdicts_as_one_process(tmp_path: Path, databases: dict[str, Path]) -> None:
    questions = SPIDER_QUESTIONS * 12  # 60 pairs: above the pool's threshold
    report = import_benchmark("spider", _spider_folder(tmp_path / "spider", databases, questions),
                              tmp_path / "project")
    suite = load_suite(report.suite)
    configs: dict[str, DatasourceConfig] = {ds.id: ds for ds in load_config(report.config).datasources}
    variants = ["{}", "SELECT * FROM ({}) LIMIT 1", "SELECT COUNT(*) FROM ({})", "SELEC {}"]
    predictions = {c.id: variants[i % 4].format(c.sql) for i, c in enumerate(suite.cases)}
    one = grade(suite, predictions, configs, workers=1)
    pool = grade(suite, predictions, configs, workers=2)
    assert pool.workers == 2 and one.workers == 1
    assert [g.model_dump(exclude={"elapsed_ms"}) for g in pool.cases] == \
        [g.model_dump(exclude={"elapsed_ms"}) for g in one.cases]
    assert 0 < one.execution.passed < one.graded


def test_bench_import_on_the_command_line(tmp_path: Path, databases: dict[str, Path],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    folder = _bird_folder(tmp_path / "bird", databases)
    code = main(["bench", "import", "bird", str(folder), "--out", str(tmp_path / "project"), "--limit", "2"])
    assert code == 0
    assert "2 bird dev question(s) imported as drafts over 2 database(s); rows written for 2" in capsys.readouterr().out
    assert main(["bench", "import", "spider", str(folder), "--out", str(tmp_path / "other")]) == 2
    assert "dev.json: entry 0 (question_id 0): field 'query': missing" in capsys.readouterr().err


def test_a_kept_open_sqlite_connection_stays_read_only_and_closes(tmp_path: Path, chinook_path: Path) -> None:
    from nl2sql_assets.datasources.base import ReadOnlyViolation
    from nl2sql_assets.datasources.sqlite import SqliteAdapter

    adapter = SqliteAdapter(DatasourceConfig(id="chinook", engine="sqlite", path=chinook_path), keep_open=True)
    assert adapter.execute("SELECT COUNT(*) FROM Artist").rows == [[275]]
    kept = adapter._local.conn
    assert adapter.execute("SELECT COUNT(*) FROM Genre").rows == [[25]]
    assert adapter._local.conn is kept  # one connection for every statement of this thread
    for sql in ("SELECT load_extension('x')", "SELECT * FROM Artist; DELETE FROM Artist"):
        with pytest.raises(ReadOnlyViolation):
            adapter.execute(sql)
    assert adapter.execute("SELECT COUNT(*) FROM Artist").rows == [[275]]
    adapter.close()
    with pytest.raises(sqlite3.ProgrammingError):
        kept.execute("SELECT 1")
    assert adapter.execute("SELECT COUNT(*) FROM Album").rows == [[347]]  # reopens after close
    adapter.close()


@pytest.mark.parametrize("sql", [
    "DELETE FROM Artist", "WITH x AS (SELECT 1) DELETE FROM Artist", "REPLACE INTO Artist VALUES (1, 'x')",
    "WITH a AS (SELECT 1) INSERT INTO Artist VALUES (999, 'x')", "VACUUM INTO '{tmp}/vacuumed.db'",
    "SELECT 1; VACUUM INTO '{tmp}/vacuumed.db'", "SELECT 1; DELETE FROM Artist", "ATTACH '{tmp}/other.db' AS other",
    "PRAGMA writable_schema = 1", "SELECT load_extension('x')", "  ;",
])
def test_the_bulk_reader_leaves_the_statement_to_sqlite_and_still_refuses_every_write(
        tmp_path: Path, chinook_path: Path, sql: str) -> None:
    from nl2sql_assets.datasources.base import ReadOnlyViolation
    from nl2sql_assets.datasources.sqlite import SqliteAdapter

    db = tmp_path / "chinook.sqlite"
    shutil.copy(chinook_path, db)
    before = db.read_bytes()
    adapter = SqliteAdapter(DatasourceConfig(id="chinook", engine="sqlite", path=db), bulk=True)
    try:
        with pytest.raises(ReadOnlyViolation):
            adapter.execute(sql.format(tmp=tmp_path))
        assert adapter.execute(" -- a comment first\nSELECT COUNT(*) FROM Artist; -- and after").rows == [[275]]
    finally:
        adapter.close()
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chinook.sqlite"]
