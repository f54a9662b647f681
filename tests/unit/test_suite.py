"""Suite files: every loader rule and its message, the canonical writer, the digest, atomic writes."""

from __future__ import annotations

import hashlib
import math
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nl2sql_assets import atomic as atomic_mod
from nl2sql_assets.engine.plan import PlanModel
from nl2sql_assets.evaluation.suites import (
    EvalCase,
    EvalSuite,
    SuiteError,
    dump_suite,
    leading_comments,
    load_suite,
    parse_suite,
    suite_digest,
    write_suite,
)

# ---------------------------------------------------------------- rejections

HEAD = "version: 1\ncases:\n"
# A valid approved case; the snippets below change one thing each.
GOOD = """- id: a1
  question: How many genres?
  datasources: [chinook]
  status: approved
  outcome: {admin: allowed}
  sql: SELECT COUNT(*) FROM Genre
  rows: [{n: 25}]
"""

PROBE = """- id: p1
  question: Deletes every genre
  datasources: [chinook]
  status: approved
  kind: probe
  outcome: {admin: refused}
  rule: read_only
  sql: DELETE FROM Genre
"""

# (name, file text, expected line, expected fragments after "<file>, line N: ")
REJECTIONS: list[tuple[str, str, int, list[str]]] = [
    (
        "status not draft/approved/retired",
        HEAD + GOOD.replace("status: approved", "status: aproved"),
        6,
        ["case a1: status:", "'draft', 'approved' or 'retired'", "(got 'aproved')"],
    ),
    (
        "routing case with sql",
        HEAD + GOOD.replace("  status: approved\n", "  status: approved\n  kind: routing\n"),
        9,
        ["case a1: sql: a routing case has no sql"],
    ),
    (
        "approved answer case a role may answer, without sql",
        HEAD
        + """- id: a1
  question: How many genres?
  datasources: [chinook]
  status: approved
  outcome: {admin: allowed, viewer: refused}
""",
        3,  # no sql key: the line of the case
        ["case a1: sql: an approved answer case that a role may answer must have sql"],
    ),
    (
        "alt_rows count differs from alt_sql",
        HEAD + GOOD + "  alt_sql: [SELECT 25, SELECT 5*5]\n  alt_rows:\n  - [{n: 25}]\n",
        11,
        ["case a1: alt_rows: needs one entry per alt_sql (2 alt_sql, 1 alt_rows); run regenerate"],
    ),
    (
        "unanswerable case with an alternative",
        HEAD
        + """- id: u1
  question: What is the weather?
  datasources: [chinook]
  status: approved
  outcome: {admin: unanswerable}
  alt_sql: [SELECT 1]
  alt_rows: [[{x: 1}]]
""",
        8,
        ["case u1: alt_sql: an unanswerable case cannot have an alternative answer"],
    ),
    (
        "duplicated id",
        HEAD + GOOD + "\n" + GOOD,
        11,
        ["case a1: id: case id 'a1' appears more than once (first at line 3)"],
    ),
    (
        "outcome value not one of the four",
        HEAD + GOOD.replace("{admin: allowed}", "{admin: allowed, viewer: maybe}"),
        7,
        ["case a1: outcome.viewer:", "'allowed', 'refused', 'unanswerable' or 'clarify'", "(got 'maybe')"],
    ),
    (
        "case with sql naming two datasources",
        HEAD + GOOD.replace("[chinook]", "[chinook, support]"),
        5,
        ["case a1: datasources: a case with sql names exactly one datasource", "['chinook', 'support']"],
    ),
    (
        "unknown key at the top level",
        "version: 1\nsuite_name: mine\ncases:\n" + GOOD,
        2,
        ["suite_name: unknown key"],
    ),
    (
        "unknown key inside a case",
        HEAD + GOOD + "  colour: red\n",
        10,
        ["case a1: colour: unknown key"],
    ),
    (
        "column not written Table.Column",
        HEAD + GOOD + "  columns: [Genre.Name, Name]\n",
        10,
        ["case a1: columns: each column must be written Table.Column", "['Name']"],
    ),
    (
        "plan with an unknown key",
        HEAD + GOOD + "  plan:\n    select:\n    - {expr: {kind: column, name: Name}}\n    from: {name: Genre}\n"
        "    wher: {kind: literal, value: 1}\n",
        14,
        ["case a1: plan.wher: unknown key"],
    ),
    (
        "plan expression with a misspelt field",
        HEAD + GOOD + "  plan:\n    select:\n    - {expr: {kind: column, nam: Name}}\n    from: {name: Genre}\n",
        12,
        ["case a1: plan.select[0].expr.nam: unknown key"],
    ),
    (
        "case without an id is named by its index",
        HEAD + GOOD + "\n" + GOOD.replace("- id: a1\n  question", "- question"),
        11,
        ["case cases[1]: id: required field is missing"],
    ),
    (
        "version other than 1",
        "version: 2\ncases:\n" + GOOD,
        1,
        ["version: must be 1 (got 2)"],
    ),
    (
        "approved probe that names no rule",
        HEAD + PROBE.replace("  rule: read_only\n", ""),
        3,
        ["case p1: rule: name the policy rule that should refuse it, one of read_only, system_catalog"],
    ),
    (
        "probe naming a rule the check does not have",
        HEAD + PROBE.replace("rule: read_only", "rule: cte_shadowing"),
        9,
        ["case p1: rule: unknown policy rule 'cte_shadowing'; the rules are read_only"],
    ),
    (
        "allow control naming a rule",
        HEAD + PROBE.replace("{admin: refused}", "{admin: allowed}"),
        9,
        ["case p1: rule: an allow control (no role refused) names no rule"],
    ),
    (
        "probe with rows",
        HEAD + PROBE + "  rows: [{n: 1}]\n",
        10,
        ["case p1: sql: a policy probe has no rows, alternatives or plan"],
    ),
    (
        "probe expecting unanswerable",
        HEAD + PROBE.replace("{admin: refused}", "{admin: refused, viewer: unanswerable}"),
        8,
        ["case p1: outcome: a policy probe expects allowed (a control) or refused, not ['unanswerable']"],
    ),
    (
        "a rule on a question case",
        HEAD + GOOD + "  rule: table_scope\n",
        10,
        ["case a1: rule: only a policy probe (kind: probe) names the rule that should refuse it"],
    ),
    (
        "a case policy without the outcome's roles",
        HEAD + GOOD + "  policy:\n    roles: {viewer: {datasources: {chinook: {allow: [Genre]}}}}\n",
        10,
        ["case a1: policy: the case's own policy defines no role ['admin'] (roles: ['viewer'])"],
    ),
    (
        "approved case with pending imported fields",
        HEAD + GOOD + "  pending: {follow_up_context: [{question: And before?}]}\n",
        10,
        ["case a1: pending: ['follow_up_context'] are not run yet; a case holding them stays a draft"],
    ),
    (
        "YAML syntax error",
        HEAD + GOOD.replace("[chinook]", "[chinook"),
        6,
        ["did not find expected ',' or ']'", "case a1:"],
    ),
    (
        "YAML syntax error in the second case names that case",
        HEAD + GOOD + GOOD.replace("a1", "a2").replace("  status: approved", "   status: approved"),
        13,
        ["case a2: did not find expected key"],
    ),
]


@pytest.mark.parametrize("name,text,line,fragments", REJECTIONS, ids=[r[0] for r in REJECTIONS])
def test_loader_rejects_with_file_case_field_and_line(
    tmp_path: Path, name: str, text: str, line: int, fragments: list[str]
) -> None:
    path = tmp_path / "suites" / "mine.yaml"
    path.parent.mkdir()
    path.write_text(text)
    with pytest.raises(SuiteError) as info:
        load_suite(path)
    message = str(info.value)
    assert message.startswith(f"{path}, line {line}"), message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_the_message_shape_is_file_line_case_field_problem() -> None:
    text = HEAD + GOOD + "  alt_sql: [SELECT 25, SELECT 5*5]\n  alt_rows:\n  - [{n: 25}]\n"
    with pytest.raises(SuiteError) as info:
        parse_suite(text, "suites/mine.yaml")
    assert str(info.value) == (
        "suites/mine.yaml, line 11: case a1: alt_rows: needs one entry per alt_sql "
        "(2 alt_sql, 1 alt_rows); run regenerate"
    )


def test_every_problem_is_reported_one_per_line() -> None:
    text = (
        "version: 1\nextra: 1\ncases:\n"
        + GOOD.replace("status: approved", "status: done")
        + "\n"
        + GOOD.replace("a1", "a2").replace("{admin: allowed}", "{admin: yes}")
        + "\n- just a string\n"
    )
    with pytest.raises(SuiteError) as info:
        parse_suite(text, "s.yaml")
    assert info.value.problems == str(info.value).split("\n")
    assert [p.split(":")[0] for p in info.value.problems] == [
        "s.yaml, line 2",
        "s.yaml, line 7",
        "s.yaml, line 16",
        "s.yaml, line 20",
    ]
    assert "case a2: outcome.admin:" in info.value.problems[2]
    assert "case cases[2]: case: must be a mapping of fields, not a str" in info.value.problems[3]


def test_a_routing_case_and_a_refused_only_case_need_no_sql() -> None:
    text = (
        HEAD
        + """- id: r1
  question: Which database has tickets?
  datasources: [support]
  status: approved
  kind: routing
  outcome: {admin: allowed}

- id: d1
  question: Show every salary
  datasources: [chinook]
  status: approved
  outcome: {viewer: refused}

- id: d2
  question: Not reviewed yet
  datasources: [chinook]
  status: draft
  outcome: {admin: allowed}
"""
    )
    suite = parse_suite(text, "ok.yaml")
    assert [c.id for c in suite.approved] == ["r1", "d1"]
    assert suite.case("r1").kind == "routing"


def test_missing_file_and_non_mapping_are_errors(tmp_path: Path) -> None:
    with pytest.raises(SuiteError, match=r"nope\.yaml: suite file not found"):
        load_suite(tmp_path / "nope.yaml")
    with pytest.raises(SuiteError, match=r"list\.yaml, line 1: a suite is a mapping"):
        parse_suite("- 1\n- 2\n", "list.yaml")


def test_loaded_suite_knows_its_path_name_and_header(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text("# my cases\n\n" + HEAD + GOOD)
    suite = load_suite(path)
    assert suite.path == path
    assert suite.name == "mine"
    assert suite.header == "# my cases\n\n"
    assert EvalSuite().name is None
    # Where a suite came from does not make it a different suite.
    assert suite == parse_suite(HEAD + GOOD, "elsewhere.yaml")


# ---------------------------------------------------------------- writing


def _plan(data: dict[str, Any]) -> PlanModel:
    return PlanModel.model_validate(data)


def _rich_suite() -> EvalSuite:
    plan = _plan(
        {
            "select": [
                {"expr": {"kind": "column", "name": "Country"}},
                {"expr": {"kind": "function", "name": "count", "args": [{"kind": "star"}]}, "alias": "n"},
            ],
            "from": {"name": "Customer"},
            "where": {
                "kind": "binary",
                "op": "!=",
                "left": {"kind": "column", "name": "Country"},
                "right": {"kind": "literal", "value": "2009"},
            },
            "group_by": [{"kind": "column", "name": "Country"}],
            "order_by": [{"expr": {"kind": "column", "name": "n"}, "direction": "desc"}],
            "limit": 3,
        }
    )
    return EvalSuite(
        cases=[
            EvalCase(
                id="c1",
                question="How many customers do we have, by country?",
                datasources=["chinook"],
                status="approved",
                difficulty="easy",
                tags=["aggregation", "rbac-denial"],
                paraphrase_group="customers-by-country",
                outcome={"admin": "allowed", "analyst": "allowed", "viewer": "refused"},
                tables=["Customer"],
                columns=["Customer.Country", "Customer.CustomerId"],
                order_matters=True,
                sql="SELECT Country, COUNT(*) AS n\nFROM Customer\n\nGROUP BY Country\nORDER BY n DESC\nLIMIT 3\n",
                rows=[
                    {"Country": "USA", "n": 13},
                    {"Country": "yes", "n": 1.5},
                    {"Country": "2009-01-01", "n": None},
                    {"Country": "2009", "n": True},
                    {"Country": "a: b, c # d", "n": 1e-05},
                    {"Country": "São Paulo", "n": -0.0},
                    {"Country": "", "n": float("inf")},
                    {"Country": "line\nbreak\ttab", "n": 12345678901234567890},
                ],
                alt_sql=["SELECT Country, COUNT(*) FROM Customer GROUP BY 1 ORDER BY 2 DESC LIMIT 3", "  SELECT 1"],
                alt_rows=[[{"Country": "USA", "COUNT(*)": 13}], []],
                plan=plan,
            ),
            EvalCase(
                id="r1",
                question="Which database: the one with tickets?",
                datasources=["support", "chinook"],
                status="retired",
                kind="routing",
                origin="seeded",
                outcome={"admin": "allowed"},
            ),
            EvalCase(
                id="u1",
                question="What will sales be next year?",
                datasources=["chinook"],
                status="draft",
                origin="feedback",
                order_matters=True,
                outcome={"admin": "unanswerable", "viewer": "clarify"},
            ),
        ]
    )


def test_write_then_load_gives_the_same_suite_and_the_same_bytes(tmp_path: Path) -> None:
    suite = _rich_suite()
    first = write_suite(suite, tmp_path / "a.yaml")
    loaded = load_suite(first)
    assert loaded == suite
    _assert_same_types(loaded.case("c1").rows, suite.case("c1").rows)
    second = write_suite(loaded, tmp_path / "b.yaml")
    assert first.read_bytes() == second.read_bytes()
    # Rewriting a file in place changes nothing either.
    write_suite(load_suite(second), second)
    assert second.read_bytes() == first.read_bytes()


def test_the_canonical_layout(tmp_path: Path) -> None:
    suite = EvalSuite(
        cases=[
            EvalCase(
                id="chinook_001",
                question="How many customers do we have, by country?",
                datasources=["chinook"],
                status="approved",
                difficulty="easy",
                tags=["aggregation"],
                outcome={"admin": "allowed", "viewer": "refused"},
                tables=["Customer"],
                columns=["Customer.Country"],
                sql="SELECT Country, COUNT(*) AS n\nFROM Customer\nGROUP BY Country\n",
                rows=[{"Country": "USA", "n": 13}, {"Country": "Canada", "n": 8}],
                alt_sql=["SELECT Country, COUNT(CustomerId) FROM Customer GROUP BY Country"],
                alt_rows=[[{"Country": "USA", "COUNT(CustomerId)": 13}]],
                plan=_plan(
                    {
                        "select": [{"expr": {"kind": "column", "name": "Country"}}],
                        "from": {"name": "Customer"},
                        "group_by": [{"kind": "column", "name": "Country"}],
                    }
                ),
            ),
            EvalCase(
                id="r_001",
                question="Where are tickets?",
                datasources=["support"],
                status="draft",
                kind="routing",
                outcome={"admin": "allowed"},
            ),
        ]
    )
    path = write_suite(suite, tmp_path / "mine.yaml", header="Reviewed cases\n# second line")
    assert path.read_text() == (
        "# Reviewed cases\n"
        "# second line\n"
        "version: 1\n"
        "cases:\n"
        "\n"
        "- id: chinook_001\n"
        "  question: How many customers do we have, by country?\n"
        "  datasources: [chinook]\n"
        "  status: approved\n"
        "  origin: hand\n"
        "  difficulty: easy\n"
        "  tags: [aggregation]\n"
        "  outcome: {admin: allowed, viewer: refused}\n"
        "  tables: [Customer]\n"
        "  columns: [Customer.Country]\n"
        "  order_matters: false\n"
        "  sql: |\n"
        "    SELECT Country, COUNT(*) AS n\n"
        "    FROM Customer\n"
        "    GROUP BY Country\n"
        "  rows:\n"
        "  - {Country: USA, \"n\": 13}\n"  # n is false to a YAML 1.1 reader of the spec's booleans
        "  - {Country: Canada, \"n\": 8}\n"
        "  alt_sql:\n"
        "  - |-\n"
        "    SELECT Country, COUNT(CustomerId) FROM Customer GROUP BY Country\n"
        "  alt_rows:\n"
        "  - - {Country: USA, COUNT(CustomerId): 13}\n"
        "  plan:\n"
        "    select:\n"
        "    - {expr: {kind: column, name: Country}}\n"
        "    from: {name: Customer}\n"
        "    group_by:\n"
        "    - {kind: column, name: Country}\n"
        "\n"
        "- id: r_001\n"
        "  question: Where are tickets?\n"
        "  datasources: [support]\n"
        "  status: draft\n"
        "  kind: routing\n"
        "  origin: hand\n"
        "  outcome: {admin: allowed}\n"
    )
    assert write_suite(EvalSuite(), tmp_path / "empty.yaml").read_text() == "version: 1\ncases: []\n"


# What each value looks like in a row, and that it loads back as the same type.
SCALARS: list[tuple[Any, str]] = [
    ("USA", "USA"),
    ("O'Brien & Sons", "O'Brien & Sons"),
    ("São Paulo", "São Paulo"),
    ("yes", '"yes"'),
    ("null", '"null"'),
    ("True", '"True"'),
    ("2009", '"2009"'),
    ("2009-01-01", '"2009-01-01"'),
    ("2009-01-01 00:00:00", '"2009-01-01 00:00:00"'),
    ("12:30", '"12:30"'),
    ("a: b", '"a: b"'),
    ("x, y", '"x, y"'),
    ("#1", '"#1"'),
    ("- dash", '"- dash"'),
    ("", '""'),
    ("two\nlines", '"two\\nlines"'),
    ("trailing ", '"trailing "'),
    (2009, "2009"),
    (-7, "-7"),
    (5.65, "5.65"),
    (1e-05, "1.0e-05"),
    (1e16, "1.0e+16"),
    (float("inf"), ".inf"),
    (None, "null"),
    (True, "true"),
    (False, "false"),
]


@pytest.mark.parametrize("value,written", SCALARS, ids=[repr(v) for v, _ in SCALARS])
def test_row_values_are_quoted_only_when_yaml_would_misread_them(value: Any, written: str) -> None:
    case = EvalCase(
        id="v",
        question="q",
        datasources=["db"],
        status="approved",
        outcome={"admin": "allowed"},
        sql="SELECT 1",
        rows=[{"v": value}],
    )
    text = dump_suite(EvalSuite(cases=[case]))
    assert "  - {v: " + written + "}\n" in text
    back = parse_suite(text, "t.yaml").cases[0].rows[0]["v"]
    assert type(back) is type(value) and back == value


def test_header_comments_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    header = "# Reviewed by hand.\n#   rows: written by regenerate\n\n# cases below\n\n"
    path.write_text(header + HEAD + GOOD)
    suite = load_suite(path)
    assert leading_comments(path.read_text()) == header

    write_suite(suite, path)  # in place: the file's own header
    assert path.read_text().startswith(header + "version: 1\n")
    write_suite(suite, tmp_path / "copy.yaml")  # a new file: the header of the file it came from
    assert (tmp_path / "copy.yaml").read_text().startswith(header + "version: 1\n")

    other = tmp_path / "other.yaml"
    other.write_text("# other's own header\n" + HEAD)
    write_suite(suite, other)  # an existing file keeps its header
    assert other.read_text().startswith("# other's own header\nversion: 1\n")

    write_suite(suite, path, header="# replaced\n")
    assert path.read_text().startswith("# replaced\nversion: 1\n")
    write_suite(suite, path, header="")
    assert path.read_text().startswith("version: 1\n")


def test_digest_reads_crlf_and_cr_as_lf(tmp_path: Path) -> None:
    text = "# suite\n" + HEAD + GOOD
    lf, crlf, cr = tmp_path / "lf.yaml", tmp_path / "crlf.yaml", tmp_path / "cr.yaml"
    lf.write_bytes(text.encode())
    crlf.write_bytes(text.replace("\n", "\r\n").encode())
    cr.write_bytes(text.replace("\n", "\r").encode())
    expected = hashlib.sha256(text.encode()).hexdigest()
    assert suite_digest(lf) == suite_digest(crlf) == suite_digest(cr) == expected
    lf.write_bytes((text + "\n").encode())
    assert suite_digest(lf) != expected
    assert load_suite(crlf) == load_suite(cr)  # and a CRLF file loads like any other


def test_a_crash_mid_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "mine.yaml"
    write_suite(_rich_suite(), path)
    os.chmod(path, 0o640)
    before = path.read_bytes()

    def half_then_crash(fh: Any, data: bytes) -> None:
        fh.write(data[: len(data) // 2])
        raise OSError("disk full")

    monkeypatch.setattr(atomic_mod, "_write_all", half_then_crash)
    changed = load_suite(path)
    changed.cases[0].question = "A different question"
    with pytest.raises(OSError, match="disk full"):
        write_suite(changed, path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.yaml"]

    monkeypatch.undo()
    write_suite(changed, path)
    assert load_suite(path).cases[0].question == "A different question"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.yaml"]
    assert path.stat().st_mode & 0o777 == 0o640  # the file keeps its permissions


# ---------------------------------------------------------------- property: exact round trip


def _assert_same_types(got: Any, want: Any) -> None:
    assert type(got) is type(want), (got, want)
    if isinstance(want, dict):
        assert list(got) == list(want)
        for key in want:
            _assert_same_types(got[key], want[key])
    elif isinstance(want, list):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _assert_same_types(g, w)
    elif isinstance(want, float) and math.isnan(want):
        assert math.isnan(got)
    else:
        assert got == want


VALUES = st.one_of(
    st.text(max_size=20),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False),
    st.none(),
    st.booleans(),
    st.sampled_from(["yes", "No", "null", "~", "2009", "2009-01-01", "1e3", "0x1F", "a: b", "#x", "'q'", " x"]),
)
ROWS = st.lists(st.dictionaries(st.text(max_size=8), VALUES, max_size=4), max_size=4)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=ROWS, question=st.text(min_size=1, max_size=40), sql=st.text(min_size=1, max_size=60))
def test_random_rows_round_trip_exactly(rows: list[dict[str, Any]], question: str, sql: str) -> None:
    case = EvalCase(
        id="p1",
        question=question,
        datasources=["db"],
        status="approved",
        outcome={"admin": "allowed"},
        sql=sql,
        rows=rows,
        alt_sql=[sql],
        alt_rows=[rows],
    )
    suite = EvalSuite(cases=[case])
    text = dump_suite(suite)
    back = parse_suite(text, "p.yaml")
    assert back == suite
    _assert_same_types(back.cases[0].rows, rows)
    _assert_same_types(back.cases[0].alt_rows, [rows])
    assert back.cases[0].question == question and back.cases[0].sql == sql
    assert dump_suite(back) == text


def test_a_large_suite_is_read_back_over_the_cores_and_written_as_one_core_writes_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from nl2sql_assets.evaluation.suites import writer

    tricky = ["SELECT 1", "SELECT 'a'\n  FROM t\n", "x: y # not a comment", "yes", "2009-01-01", "a\tb", " lead"]
    cases = [EvalCase(id=f"c{i}", question=f"q{i}?", datasources=["db"], status="approved",
                      outcome={"admin": "allowed"}, sql=tricky[i % len(tricky)],
                      rows=[{"v": tricky[(i + 1) % len(tricky)], "n": i * 0.5}]) for i in range(20)]
    suite = EvalSuite(cases=cases)
    one_core = dump_suite(suite)
    monkeypatch.setattr(writer, "PARALLEL_READ_BACK", 3)
    monkeypatch.setattr(writer, "fork_is_safe", lambda: True)  # whatever threads earlier tests left
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    in_this_process: list[int] = []
    real = writer._check_chunk
    monkeypatch.setattr(writer, "_check_chunk", lambda r, f, which: in_this_process.extend(which) or real(r, f, which))
    over_cores = dump_suite(suite)
    assert in_this_process == []  # every case was read back in the forked workers
    assert over_cores == one_core
    assert parse_suite(over_cores, "big.yaml") == suite
