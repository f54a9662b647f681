"""Mode retrieval on the wide test bed, key-free, through the CLI: every case of the wide routing
suite routed among the six datasources, every answer case's schema retrieved with recall and the
amount sent, and the gate against a record of the same bed. A 100-table bed keeps every core table
(each case's gold) and builds its index in seconds; CI's gate runs the full 1,200 tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from nl2sql_assets.cli import main
from nl2sql_assets.evaluation.reporting.board import load_report
from nl2sql_assets.evaluation.suites import load_suite
from nl2sql_assets.paths import wide_routing_suite_path
from nl2sql_assets.testbed.wide_schema import SOURCES
from tests.integration.test_e2e_retrieval import keyless  # noqa: F401  (the fixture: no key, no CI)


@pytest.mark.usefixtures("keyless")
def test_the_wide_routing_suite_runs_in_mode_retrieval_and_gates(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "wide", "--out", str(tmp_path / "bed"), "--tables", "100"]) == 0
    built = capsys.readouterr().out
    assert "100 tables in 6 datasources (built in" in built
    config = tmp_path / "bed" / "nl2sql.yaml"
    out_file = tmp_path / "eval_wide.json"
    code = main(["--config", str(config), "eval", "run", "--mode", "retrieval", "--out", str(out_file)])
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    assert "routing top-1" in printed.out and "table recall" in printed.out

    suite = load_suite(wide_routing_suite_path())
    report = load_report(out_file)
    board = report.configs["retrieval"]
    assert [d.datasource_id for d in sorted(report.databases, key=lambda d: d.datasource_id)] == sorted(
        s.id for s in SOURCES)
    assert {r.case_id for r in board.results} == {c.id for c in suite.cases} and len(board.results) == 108
    for r in board.results:
        case = suite.case(r.case_id)
        # the router's shortlist, best first, out of the six
        assert r.routed is not None and len(r.routed) == report.settings["routing_candidates"], r.case_id
        assert set(r.routed) <= {s.id for s in SOURCES}
        routing = r.scores["routing"]
        assert set(routing.detail) >= {"top1", "shortlist", "routed"}
        if case.kind == "answer":
            detail = r.scores["retrieval_recall"].detail
            assert r.retrieval is not None and 1 <= len(r.retrieval) <= 8 == report.settings["k_tables"]
            assert detail["tables_sent"] == len(r.retrieval)
        else:  # a cross-database question: routing only, nothing retrieved
            assert r.retrieval is None and len(case.datasources) == 2
        assert r.usage == {} and r.cost_usd == 0.0
    assert board.routing is not None and board.routing.cases == 108
    assert board.retrieval is not None and board.retrieval.cases == 96
    assert 0 < board.retrieval.table_recall <= 1 and board.retrieval.tables_sent <= 8

    # Recorded, the run is the baseline of the next one: the same bed builds the same schema, so the
    # record is comparable and no case may flip.
    root = tmp_path / "repo"
    (root / "benchmarks").mkdir(parents=True)
    (root / "README.md").write_text("<!-- results:start -->\n<!-- results:end -->\n", encoding="utf-8")
    assert main(["eval", "publish", str(out_file), "--note", "wide bed, 100 tables", "--root", str(root)]) == 0
    assert "recorded" in capsys.readouterr().out
    (record,) = (root / "benchmarks" / "retrieval").rglob("*.json")
    assert record.parent.name == "-".join(sorted(s.id for s in SOURCES))  # the databases, by name
    code = main(["--config", str(config), "eval", "run", "--mode", "retrieval", "--out", str(tmp_path / "again.json"),
                 "--baseline", str(root / "benchmarks")])
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    assert "gate [retrieval/status]: lost 0 [], gained 0 []" in printed.out and "gate: ok" in printed.out
