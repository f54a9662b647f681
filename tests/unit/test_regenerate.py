"""regenerate: rows from the reviewed SQL through the real SQLite adapter, on a tmp copy of Chinook."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nl2sql_assets import paths
from nl2sql_assets.config import DatasourceConfig
from nl2sql_assets.datasources.registry import DatasourceRegistry
from nl2sql_assets.evaluation.suites import SuiteError, load_suite, parse_suite
from nl2sql_assets.evaluation.suites.regenerate import PackagedSuiteError, RegenerateReport, regenerate


@pytest.fixture(scope="module")
def chinook_copy(tmp_path_factory: pytest.TempPathFactory, chinook_path: Path) -> Path:
    target = tmp_path_factory.mktemp("chinook") / "chinook.sqlite"
    shutil.copyfile(chinook_path, target)
    return target


def _registry(db: Path, row_limit: int = 1000) -> DatasourceRegistry:
    return DatasourceRegistry([DatasourceConfig(id="chinook", engine="sqlite", path=db, row_limit=row_limit)])


HEADER = "# A suite of my own.\n#   rows are written by regenerate\n\n"

SUITE = (
    HEADER
    + """version: 1
cases:
- id: genres
  question: Which are the three newest genres, newest first?
  datasources: [chinook]
  status: approved
  outcome: {admin: allowed}
  order_matters: true
  sql: |
    SELECT Name FROM Genre ORDER BY GenreId DESC LIMIT 3
  alt_sql:
  - SELECT Name AS genre FROM Genre WHERE GenreId > 22 ORDER BY GenreId
  - SELECT GenreId, Name FROM Genre WHERE GenreId = 1
- id: invoices
  question: How many invoices, and what is their average total?
  datasources: [chinook]
  status: approved
  outcome: {admin: allowed, viewer: refused}
  sql: SELECT COUNT(*) AS n, ROUND(AVG(Total), 2) AS avg_total, MIN(InvoiceDate) AS first FROM Invoice
- id: broken
  question: A typo in the SQL
  datasources: [chinook]
  status: approved
  outcome: {admin: allowed}
  sql: SELECT Nmae FROM Genre
  rows:
  - {Name: kept as it was}
- id: broken_alt
  question: A typo in an alternative
  datasources: [chinook]
  status: approved
  outcome: {admin: allowed}
  sql: SELECT COUNT(*) AS n FROM Genre
  rows:
  - {n: 0}
  alt_sql: [SELECT COUNT(*) FROM Genr]
  alt_rows: [[]]
- id: doubled
  question: Two columns of the same name
  datasources: [chinook]
  status: approved
  outcome: {admin: allowed}
  sql: SELECT a.Name, g.Name FROM Artist a JOIN Genre g ON g.GenreId = a.ArtistId WHERE a.ArtistId = 1
- id: elsewhere
  question: A datasource the registry does not know
  datasources: [nowhere]
  status: approved
  outcome: {admin: allowed}
  sql: SELECT 1 AS one
  rows:
  - {one: 1}
- id: draft
  question: Not reviewed, so never run
  datasources: [chinook]
  status: draft
  outcome: {admin: allowed}
  sql: SELECT COUNT(*) AS n FROM Track
- id: route
  question: Where do tickets live?
  datasources: [support]
  status: approved
  kind: routing
  outcome: {admin: allowed}
"""
)


@pytest.fixture()
def suite_path(tmp_path: Path) -> Path:
    path = tmp_path / "mine.yaml"
    path.write_text(SUITE)
    return path


def test_rows_are_written_in_the_order_the_sql_returns_them(chinook_copy: Path, suite_path: Path) -> None:
    # The new cases and alternatives have no rows yet: the file cannot be loaded for a run ...
    with pytest.raises(SuiteError, match=r"case genres: rows: an approved case a role may answer .* run "
                                         r"`nl2sql-assets eval regenerate FILE`"):
        load_suite(suite_path)
    # (a case with its rows but not its alternatives' is refused the same way, naming alt_rows)
    with_rows = suite_path.read_text().replace(
        "    SELECT Name FROM Genre ORDER BY GenreId DESC LIMIT 3\n",
        "    SELECT Name FROM Genre ORDER BY GenreId DESC LIMIT 3\n  rows:\n  - {Name: x}\n")
    with pytest.raises(SuiteError, match="case genres: alt_rows: needs one entry per alt_sql"):
        parse_suite(with_rows, suite_path)
    report = regenerate(suite_path, _registry(chinook_copy))
    suite = load_suite(suite_path)  # ... and after regenerate it can

    genres = suite.case("genres")
    assert genres.rows == [{"Name": "Opera"}, {"Name": "Classical"}, {"Name": "Alternative"}]
    assert genres.alt_rows == [
        [{"genre": "Alternative"}, {"genre": "Classical"}, {"genre": "Opera"}],
        [{"GenreId": 1, "Name": "Rock"}],
    ]
    invoices = suite.case("invoices").rows
    assert invoices == [{"n": 412, "avg_total": 5.65, "first": "2009-01-01 00:00:00"}]
    assert [type(v) for v in invoices[0].values()] == [int, float, str]  # a timestamp stays a string

    # Two columns of one name keep both, by position: the second is keyed ``Name (2)``.
    assert suite.case("doubled").rows == [{"Name": "AC/DC", "Name (2)": "Rock"}]

    assert report.cases == 3
    assert report.written == 5  # genres: sql and two alternatives; invoices and doubled: sql
    assert report.unchanged is False
    assert report.path == suite_path


def test_failed_cases_are_listed_and_keep_their_rows(chinook_copy: Path, suite_path: Path) -> None:
    report = regenerate(suite_path, _registry(chinook_copy))
    reasons = {f.case_id: f.reason for f in report.failed}
    assert sorted(reasons) == ["broken", "broken_alt", "elsewhere"]
    assert reasons["broken"].startswith("sql failed:") and "no such column: Nmae" in reasons["broken"]
    assert reasons["broken_alt"].startswith("alt_sql[0] failed:") and "no such table: Genr" in reasons["broken_alt"]
    assert "datasource 'nowhere' is not available" in reasons["elsewhere"]

    suite = load_suite(suite_path)
    assert suite.case("broken").rows == [{"Name": "kept as it was"}]
    # One failing alternative keeps the whole case as it was, its good sql included.
    assert suite.case("broken_alt").rows == [{"n": 0}]
    assert suite.case("broken_alt").alt_rows == [[]]
    assert suite.case("draft").rows is None  # drafts never run
    assert suite.case("route").rows is None


def test_a_result_cut_at_the_row_limit_is_refused(chinook_copy: Path, suite_path: Path) -> None:
    # With a row limit of 2, genres' three-row results are cut; invoices' single row is not.
    report = regenerate(suite_path, _registry(chinook_copy, row_limit=2))
    reasons = {f.case_id: f.reason for f in report.failed}
    assert reasons["genres"].startswith("sql: the result was cut at the datasource's row limit (2 rows)")
    assert "alt_sql[0]: the result was cut" in reasons["genres"]
    suite = load_suite(suite_path, allow_stale_rows=True)  # genres still lacks its alt_rows
    assert suite.case("genres").rows is None
    assert suite.case("genres").alt_rows == []
    assert suite.case("invoices").rows == [
        {"n": 412, "avg_total": 5.65, "first": "2009-01-01 00:00:00"}
    ]
    assert report.cases == 2  # invoices and doubled (one row each)


def test_only_rows_change_and_the_header_stays(chinook_copy: Path, suite_path: Path) -> None:
    before = load_suite(suite_path, allow_stale_rows=True)
    regenerate(suite_path, _registry(chinook_copy))
    after = load_suite(suite_path)
    assert suite_path.read_text().startswith(HEADER + "version: 1\n")
    strip = {"rows", "alt_rows"}
    assert [c.model_dump(exclude=strip) for c in after.cases] == [c.model_dump(exclude=strip) for c in before.cases]


def test_running_twice_changes_nothing(chinook_copy: Path, suite_path: Path) -> None:
    registry = _registry(chinook_copy)
    regenerate(suite_path, registry)
    first = suite_path.read_bytes()
    stamp = suite_path.stat().st_mtime_ns, suite_path.stat().st_ino
    again = regenerate(suite_path, registry)
    assert suite_path.read_bytes() == first
    assert again.unchanged is True
    assert (suite_path.stat().st_mtime_ns, suite_path.stat().st_ino) == stamp  # not even rewritten
    assert again.cases == 3 and again.written == 5  # the rows were still checked against the database
    assert [f.case_id for f in again.failed] == ["broken", "broken_alt", "elsewhere"]


def test_a_crlf_copy_of_an_up_to_date_suite_is_left_alone(chinook_copy: Path, suite_path: Path) -> None:
    regenerate(suite_path, _registry(chinook_copy))
    crlf = suite_path.read_bytes().replace(b"\n", b"\r\n")
    suite_path.write_bytes(crlf)
    assert regenerate(suite_path, _registry(chinook_copy)).unchanged is True
    assert suite_path.read_bytes() == crlf


def test_a_packaged_suite_is_refused_unless_allowed(
    chinook_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = tmp_path / "package" / "suites"
    shipped.mkdir(parents=True)
    monkeypatch.setattr(paths, "packaged_suites_dir", lambda: shipped)
    path = shipped / "chinook.yaml"
    path.write_text(SUITE)
    with pytest.raises(PackagedSuiteError) as info:
        regenerate(path, _registry(chinook_copy))
    assert str(path) in str(info.value) and "allow_packaged=True" in str(info.value)
    assert path.read_text() == SUITE

    report = regenerate(path, _registry(chinook_copy), allow_packaged=True)
    assert isinstance(report, RegenerateReport) and report.cases == 3
    assert load_suite(path).case("invoices").rows is not None


def test_the_committed_chinook_suite_is_what_regenerate_writes(chinook_copy: Path, tmp_path: Path) -> None:
    committed = paths.chinook_suite_path()
    copy = tmp_path / "chinook.yaml"
    shutil.copyfile(committed, copy)
    report = regenerate(copy, _registry(chinook_copy))
    assert report.failed == []
    assert report.unchanged is True
    assert copy.read_bytes() == committed.read_bytes()


# ---------------------------------------------------------------- only what changes is rewritten

LAYOUT = """# my suite
version: 1
cases:
# --- catalog questions ---
- id: genres
  question: How many genres?
  datasources: [chinook]
  status: approved
  outcome: {admin: allowed}
  sql: SELECT COUNT(*) AS n FROM Genre   # one line, as I like it
  rows:
  - {n: 0}
  tags: ['catalog']    # quoted on purpose

# --- left alone: its rows are right ---
- id: media
  question: How many media types?
  datasources: [chinook]
  status: approved
  outcome: {admin: allowed}
  sql: "SELECT COUNT(*) AS n FROM MediaType"
  rows: [{n: 5}]
- id: both
  question: Tracks in two databases at once
  datasources: [chinook, support]
  status: approved
  outcome: {admin: allowed}
  sql: SELECT COUNT(*) AS n FROM Track
- id: typo
  question: A field name typo
  datasources: [chinook]
  status: approved
  outcome: {admin: allowed}
  sql: SELECT 1 AS one
  colour: red
- id: artists
  question: How many artists?
  datasources: [chinook]
  status: approved
  outcome: {admin: allowed}
  sql: SELECT COUNT(*) AS n FROM Artist
"""


def test_only_changed_rows_blocks_are_rewritten_and_every_other_byte_stays(chinook_copy: Path, tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(LAYOUT)
    report = regenerate(path, _registry(chinook_copy))
    text = path.read_text()
    # genres' stale row is replaced in place; artists gains rows right after its one-line sql
    expected = LAYOUT.replace("  rows:\n  - {n: 0}\n", "  rows:\n  - {n: 25}\n").replace(
        "  sql: SELECT COUNT(*) AS n FROM Artist\n", "  sql: SELECT COUNT(*) AS n FROM Artist\n  rows:\n  - {n: 275}\n")
    # ...and a plain key `n`, false to a reader of the YAML 1.1 spec's booleans, is quoted wherever it is.
    assert text == expected.replace("{n: ", '{"n": ')
    assert report.requoted == 1  # media's row: the rows written new are written quoted
    assert report.cases == 3 and report.unchanged is False
    reasons = {f.case_id: f.reason for f in report.failed}
    # a case the model rejects is listed as failed with the loader's words, and blocks nothing
    assert list(reasons) == ["both", "typo"]
    assert "a case with sql names exactly one datasource" in reasons["both"]
    assert "colour: unknown key" in reasons["typo"]


def test_cases_of_one_paraphrase_group_must_return_the_same_rows(chinook_copy: Path, tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("""version: 1
cases:
- id: a
  question: How many genres are there?
  datasources: [chinook]
  status: approved
  paraphrase_group: pg_genres
  outcome: {admin: allowed}
  sql: SELECT COUNT(*) AS genres FROM Genre
- id: b
  question: Count the genres.
  datasources: [chinook]
  status: approved
  paraphrase_group: pg_genres
  outcome: {admin: allowed}
  sql: SELECT COUNT(*) AS n FROM Genre WHERE GenreId > 1
""")
    report = regenerate(path, _registry(chinook_copy))
    assert [(f.case_id, f.reason) for f in report.failed] == [
        ("b", "paraphrase_group pg_genres: its rows differ from those of case a (cases of one group ask the same "
              "thing and return the same rows)")]
    # b has no rows to grade against: it cannot be loaded for a run until its conflict is settled
    with pytest.raises(SuiteError, match=r"case b: rows: .* eval regenerate"):
        load_suite(path)
    suite = load_suite(path, allow_stale_rows=True)
    assert suite.case("a").rows == [{"genres": 25}] and suite.case("b").rows is None
    # Written by hand, the same conflict is an error of the file naming both cases.
    path.write_text(path.read_text().replace(
        "  sql: SELECT COUNT(*) AS n FROM Genre WHERE GenreId > 1\n",
        "  sql: SELECT COUNT(*) AS n FROM Genre WHERE GenreId > 1\n  rows:\n  - {n: 24}\n"))
    with pytest.raises(SuiteError, match=r"line \d+: case b: rows: paraphrase_group pg_genres: the rows differ "
                                         r"from those of case a \(line \d+\)"):
        load_suite(path)
