"""The parsed-suite cache: a hit gives the same suite as parsing the file, a changed file is
parsed again, a broken suite is never stored, a damaged entry is a miss."""

from __future__ import annotations

from pathlib import Path

import pytest

from nl2sql_assets.evaluation.suites import SuiteError, load_suite, loader, suite_digest
from nl2sql_assets.evaluation.suites.cache import entry_path
from nl2sql_assets.paths import chinook_suite_path

SUITE = """# a small suite
version: 1
cases:
- id: a1
  question: How many genres?
  datasources: [chinook]
  status: approved
  outcome: {admin: allowed}
  sql: SELECT COUNT(*) FROM Genre
  rows: [{n: 25}]
"""


def _no_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any YAML parse fail the test: what loads now came from the cache."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the suite was parsed again instead of read from the cache")

    monkeypatch.setattr(loader, "parse_suite", refuse)


def test_a_hit_is_the_suite_the_file_parses_to(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = chinook_suite_path()
    parsed = load_suite(path)
    first = load_suite(path, cache_dir=tmp_path)  # a miss: parsed, then stored
    assert entry_path(tmp_path, suite_digest(path), False).is_file()
    _no_parsing(monkeypatch)
    cached = load_suite(path, cache_dir=tmp_path)
    assert cached.cases == parsed.cases == first.cases
    assert [c.fingerprint() for c in cached.cases] == [c.fingerprint() for c in parsed.cases]
    assert cached.header == parsed.header and cached.header.startswith("# The Chinook suite")
    assert cached.path == path and cached.name == "chinook"


def test_a_changed_file_is_parsed_again(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    cache = tmp_path / "cache"
    path.write_text(SUITE, encoding="utf-8")
    assert load_suite(path, cache_dir=cache).cases[0].question == "How many genres?"
    path.write_text(SUITE.replace("How many genres?", "How many genres are there?"), encoding="utf-8")
    assert load_suite(path, cache_dir=cache).cases[0].question == "How many genres are there?"
    assert len(list(cache.glob("*.json"))) == 2  # one entry per digest


def test_a_broken_suite_says_file_case_and_field_and_is_not_stored(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    cache = tmp_path / "cache"
    path.write_text(SUITE.replace("status: approved", "status: aproved"), encoding="utf-8")
    for _ in range(2):
        with pytest.raises(SuiteError) as info:
            load_suite(path, cache_dir=cache)
        assert f"{path}, line 7: case a1: status:" in str(info.value)
    assert not cache.exists() or not list(cache.glob("*.json"))


def test_a_damaged_entry_is_a_miss(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    cache = tmp_path / "cache"
    path.write_text(SUITE, encoding="utf-8")
    load_suite(path, cache_dir=cache)
    entry = entry_path(cache, suite_digest(path), False)
    entry.write_text('{"format": 1, "digest": "' + suite_digest(path) + '", "header": "", "cases": [{"id": 3}]}')
    assert load_suite(path, cache_dir=cache).cases[0].id == "a1"
    entry.write_bytes(b"\x00not json")
    assert load_suite(path, cache_dir=cache).cases[0].id == "a1"


def test_stale_rows_allowed_is_its_own_entry(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    cache = tmp_path / "cache"
    path.write_text(SUITE + "  alt_sql: [SELECT 25]\n", encoding="utf-8")
    assert load_suite(path, cache_dir=cache, allow_stale_rows=True).cases[0].alt_sql == ["SELECT 25"]
    assert entry_path(cache, suite_digest(path), True).is_file()
    with pytest.raises(SuiteError, match="alt_rows"):  # the strict load still checks, cache or not
        load_suite(path, cache_dir=cache)


def test_an_unwritable_cache_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SUITE, encoding="utf-8")
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert load_suite(path, cache_dir=blocker / "cache").cases[0].id == "a1"
