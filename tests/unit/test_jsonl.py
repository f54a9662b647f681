"""JSON Lines gold sets: the case contract mapped onto our cases, lossless both ways; a foreign gold
set imported as drafts; every problem named by file, line, case and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nl2sql_assets import paths
from nl2sql_assets.cli import main
from nl2sql_assets.errors import RunRefused
from nl2sql_assets.evaluation.suites import EvalCase, load_suite
from nl2sql_assets.evaluation.suites.jsonl import (
    ImportContext,
    JsonlError,
    case_to_line,
    export_lines,
    import_jsonl,
    import_lines,
)

CTX = ImportContext(roles=("analyst",), datasources={"chinook": Path("/data/chinook.sqlite"),
                                                     "support": Path("/data/support.duckdb"),
                                                     "webanalytics": Path("/data/webanalytics.duckdb")})


@pytest.mark.parametrize("name", ["chinook", "multidomain", "routing"])
def test_every_shipped_suite_round_trips_losslessly(name: str) -> None:
    suite = load_suite(paths.packaged_suites_dir() / f"{name}.yaml")
    text = export_lines(suite.cases)
    back = import_lines(text, f"{name}.jsonl", CTX)
    assert back == suite.cases  # ours -> JSONL -> ours
    assert export_lines(back) == text  # JSONL -> ours -> JSONL
    assert len(text.splitlines()) == len(suite.cases)


def _case(**fields: object) -> EvalCase:
    base = {"id": "c1", "question": "How many albums?", "datasources": ["chinook"], "status": "approved",
            "outcome": {"admin": "allowed"}, "sql": "SELECT COUNT(*) AS n FROM Album", "rows": [{"n": 347}]}
    return EvalCase.model_validate({**base, **fields})


ONE_CASE_EACH = [
    _case(),
    _case(tags=["single-table", "aggregation"], difficulty="easy", paraphrase_group="pg", tables=["Album"],
          columns=["Album.AlbumId"], order_matters=True, alt_sql=["SELECT 347 AS n"], alt_rows=[[{"n": 347}]]),
    _case(domain="music catalog", origin="imported", status="draft", rows=None),
    _case(status="draft", rows=None, pending={"semantic_model": "m.yml"}),
    _case(turns=[{"question": "And before?", "sql": "SELECT 1",
                  "plan": {"select": [{"expr": {"kind": "literal", "value": 1}}], "from": {"name": "Album"}}}],
          candidates=3, plan={"select": [{"expr": {"kind": "column", "name": "AlbumId"}}], "from": {"name": "Album"}},
          candidate_plans=[{"select": [{"expr": {"kind": "column", "name": "Title"}}], "from": {"name": "Album"}}]),
    _case(candidates=True),
    _case(kind="probe", sql="DELETE FROM Album", rows=None, outcome={"admin": "refused", "viewer": "refused"},
          rule="read_only", tags=["policy-rejection"]),
    _case(kind="probe", sql="SELECT Title FROM Album LIMIT 5", rows=None, outcome={"viewer": "allowed"},
          policy={"roles": {"viewer": {"row_budget": 10, "datasources": {"chinook": {"allow": ["Album"]}}}}}),
    _case(kind="routing", sql=None, rows=None, datasources=["chinook", "support"]),
    _case(outcome={"admin": "unanswerable"}, sql=None, rows=None),
]


@pytest.mark.parametrize("case", ONE_CASE_EACH, ids=lambda c: f"{c.kind}-{c.status}-{sorted(c.pending)}")
def test_each_kind_of_case_round_trips(case: EvalCase) -> None:
    line = case_to_line(case)
    assert list(line)[:5] == ["id", "domain", "category", "question", "database"]  # the contract's keys first
    assert import_lines(json.dumps(line), "one.jsonl", CTX) == [case]


def test_probes_follow_ups_and_candidates_use_the_contract_s_own_keys() -> None:
    probe, control, pending = ONE_CASE_EACH[6], ONE_CASE_EACH[7], ONE_CASE_EACH[3]
    line = case_to_line(probe)
    assert (line["expected_outcome"], line["policy_probe_sql"], line["policy_rule"]) == (
        "policy_rejection", "DELETE FROM Album", "read_only")
    assert "expected_sql" not in line and line["category"] == "policy-rejection"
    assert case_to_line(control)["expected_outcome"] == "policy_allowed"
    assert case_to_line(control)["sql_policy"]["roles"]["viewer"]["row_budget"] == 10
    line = case_to_line(pending)
    assert line["semantic_model"] == "m.yml" and line["follow_up_context"] is None
    line = case_to_line(ONE_CASE_EACH[4])
    assert line["follow_up_context"][0]["question"] == "And before?"
    assert line["follow_up_context"][0]["sql"] == "SELECT 1"
    assert line["candidate_selection"] == 3
    assert case_to_line(ONE_CASE_EACH[5])["candidate_selection"] is True
    assert case_to_line(ONE_CASE_EACH[8])["database"] == ["chinook", "support"]


FOREIGN = [
    {"id": "m1", "domain": "music", "category": "single-table", "question": "How many albums?",
     "database": "chinook", "expected_sql": "SELECT COUNT(*) FROM Album"},
    {"id": "m2", "domain": "music", "category": "follow-up", "question": "And tracks?", "database": "chinook.sqlite",
     "expected_sql": "SELECT COUNT(*) FROM Track", "follow_up_context": [{"question": "How many albums?"}],
     "candidate_selection": True},
    {"id": "m3", "domain": "chinook", "category": "policy-rejection", "question": "Remove every album",
     "expected_outcome": "policy_rejection", "policy_probe_sql": "DELETE FROM Album"},
]


def test_a_foreign_gold_set_becomes_drafts_with_its_fields_kept() -> None:
    text = "".join(json.dumps(line) + "\n" for line in FOREIGN)
    m1, m2, m3 = import_lines(text, "gold.jsonl", ImportContext(roles=("analyst", "viewer"), database="chinook",
                                                                  datasources=CTX.datasources))
    assert (m1.status, m1.origin, m1.kind, m1.domain, m1.tags) == ("draft", "imported", "answer", "music",
                                                                   ["single-table"])
    assert m1.outcome == {"analyst": "allowed", "viewer": "allowed"}  # the import's default roles
    assert m2.datasources == ["chinook"]  # a database file maps onto the datasource reading it
    assert [t.question for t in m2.turns] == ["How many albums?"] and m2.candidates is True and not m2.pending
    assert (m3.kind, m3.sql, m3.rule, m3.datasources, m3.domain) == ("probe", "DELETE FROM Album", None,
                                                                     ["chinook"], None)
    assert m3.outcome == {"analyst": "refused", "viewer": "refused"}


def test_every_problem_is_named_by_file_line_case_and_field() -> None:
    lines = [
        '{"id": "a", "question": "q", "database": "chinook", "expected_sql": "SELECT 1", "colour": "red"}',
        "not json",
        '{"id": "b", "question": "q", "database": "nowhere.db", "expected_sql": "SELECT 1"}',
        '{"id": "c", "question": "q", "database": "chinook", "sql_policy": "strict"}',
        '{"id": "d", "question": "q", "database": "chinook", "expected_outcome": "policy_rejection", '
        '"policy_probe_sql": "DELETE FROM x", "expected_sql": "SELECT 1"}',
        '{"id": "e", "question": "q", "database": "chinook", "expected_sql": "SELECT 1", "status": "approved", '
        '"semantic_model": "m.yml"}',
        '{"id": "f", "question": "q", "database": "chinook", "expected_outcome": "rejected", "policy_probe_sql": "x"}',
        '{"id": "a", "question": "q", "database": "chinook", "expected_sql": "SELECT 1"}',
        '{"question": "q", "database": "chinook"}',
    ]
    with pytest.raises(JsonlError) as info:
        import_lines("\n".join(lines), "bad.jsonl", CTX)
    problems = info.value.problems
    assert problems[0].startswith("bad.jsonl, line 1: case a: colour: unknown key")
    assert problems[1].startswith("bad.jsonl, line 2: not JSON")
    assert "line 3: case b: database 'nowhere.db' is neither a datasource id nor the file of one" in problems[2]
    assert "line 4: case c: sql_policy: 'strict' names a policy; give the policy itself" in problems[3]
    assert "line 5: case d: policy_probe_sql: a probe has expected_outcome and policy_probe_sql, and no" in problems[4]
    assert "line 6: case e: pending: ['semantic_model'] are not run yet" in problems[5]
    assert "line 7: case f: expected_outcome: policy_rejection or policy_allowed, not 'rejected'" in problems[6]
    assert "line 8: case a: id: case id 'a' appears more than once (first at line 1)" in problems[7]
    assert problems[8] == "bad.jsonl, line 9: id: required field is missing"
    assert len(problems) == 9


def test_import_writes_a_new_draft_suite_and_never_replaces_a_file(tmp_path: Path) -> None:
    source = tmp_path / "gold.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in FOREIGN), encoding="utf-8")
    out = tmp_path / "imported.yaml"
    ctx = ImportContext(roles=("analyst",), database="chinook", datasources=CTX.datasources)
    report = import_jsonl(source, out, ctx)
    assert (report.cases, report.drafts, report.pending) == (3, 3, [])
    suite = load_suite(out)
    assert [c.id for c in suite.cases] == ["m1", "m2", "m3"] and not suite.approved
    assert [t.question for t in suite.case("m2").turns] == ["How many albums?"]  # the follow-up's turn, kept
    assert suite.case("m2").candidates is True
    assert "Imported by `nl2sql-assets eval import` from gold.jsonl" in suite.header
    with pytest.raises(JsonlError, match="already exists"):
        import_jsonl(source, out, ctx)
    shipped = paths.packaged_suites_dir() / "imported_here.yaml"
    with pytest.raises(RunRefused, match="a suite the package ships"):
        import_jsonl(source, shipped, ctx)
    assert not shipped.exists()


def test_the_cli_imports_and_exports(demo_project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "gold.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in FOREIGN), encoding="utf-8")
    out = tmp_path / "drafts.yaml"
    config = demo_project / "nl2sql.yaml"
    assert main(["--config", str(config), "eval", "import", str(source), "--out", str(out), "--database", "chinook"]) == 0
    assert "3 case(s) imported, 3 of them drafts" in capsys.readouterr().out
    assert load_suite(out).case("m1").outcome == {"analyst": "allowed"}  # the demo's default role

    exported = tmp_path / "chinook.jsonl"
    assert main(["eval", "export", str(demo_project / "suites" / "chinook.yaml"), "--jsonl", str(exported)]) == 0
    assert import_lines(exported.read_text(encoding="utf-8"), exported, CTX) == load_suite(
        demo_project / "suites" / "chinook.yaml").cases
    capsys.readouterr()
    assert main(["eval", "export", str(out), "--jsonl", "-"]) == 0
    assert [json.loads(line)["id"] for line in capsys.readouterr().out.splitlines()] == ["m1", "m2", "m3"]

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n', encoding="utf-8")
    assert main(["--config", str(config), "eval", "import", str(bad), "--out", str(tmp_path / "x.yaml")]) == 2
    assert "bad.jsonl, line 1: case x: database: the line names no database" in capsys.readouterr().err
