"""The plain functions the asset graph runs: a config's scoreboard over its stored passes."""

from __future__ import annotations

from pathlib import Path

from nl2sql_assets.config import GateSettings
from nl2sql_assets.evaluation.history import gate_against_benchmarks, scoreboard_report, suite_report
from nl2sql_assets.evaluation.history.records import records_from_report, write_record
from nl2sql_assets.evaluation.history.warehouse import Warehouse
from tests.unit.test_gate import report, report_parts


def _store(wh: Warehouse, pass_index: int, digest: str, day: int, verdict: str = "pass") -> None:
    records, meta = report_parts({"c1": verdict, "c2": "pass"}, mode="plans", digest=digest, day=day)
    records = [r.model_copy(update={"pass_index": pass_index}) for r in records]
    wh.write_pass("s", "plans", pass_index, records, meta)


def test_passes_of_one_series_are_merged_with_pass_k(tmp_path: Path):
    wh = Warehouse(tmp_path)
    _store(wh, 1, "d1", day=1)
    _store(wh, 2, "d1", day=2, verdict="fail")
    board_report = scoreboard_report("s", "plans", wh)
    board = board_report.configs["plans"]
    assert board_report.passes == 2
    assert board.accuracy.execution.total == 4
    assert board.accuracy.pass_k.execution.passed == 1  # c1 failed one of its two passes
    assert "passes_left_out" not in board_report.settings


def test_passes_stored_before_the_suite_changed_are_left_out_and_named(tmp_path: Path):
    wh = Warehouse(tmp_path)
    _store(wh, 1, "new", day=3)
    _store(wh, 2, "old", day=1, verdict="fail")
    _store(wh, 3, "old", day=2)
    board_report = scoreboard_report("s", "plans", wh)
    assert board_report.passes == 1
    assert [s.digest for s in board_report.suites] == ["new"]
    assert board_report.settings["passes_left_out"] == [2, 3]
    assert board_report.configs["plans"].accuracy.execution.rate == 1.0


def test_the_suite_report_compares_one_mode_and_names_the_configs_left_out(tmp_path: Path):
    wh = Warehouse(tmp_path)
    _store(wh, 1, "d1", day=1)  # config plans
    records, meta = report_parts({"c1": "pass"}, mode="retrieval", digest="d1", day=1)
    wh.write_pass("s", "retrieval", 1, records, meta)
    combined = suite_report("s", wh)
    assert combined.mode == "plans" and list(combined.configs) == ["plans"]
    assert combined.settings["configs_left_out"] == ["retrieval"]


def test_no_record_yet_passes_but_an_unreadable_record_fails_the_gate(tmp_path: Path):
    run = report({"c1": "pass"}, mode="plans", day=2)
    benchmarks = tmp_path / "benchmarks"
    assert gate_against_benchmarks(run, benchmarks, GateSettings()).status == "no_baseline"
    for record in records_from_report(report({"c1": "pass"}, mode="plans", day=1)):
        write_record(record, tmp_path)
    assert gate_against_benchmarks(run, benchmarks, GateSettings()).status == "passed"
    folder = next(benchmarks.glob("plans/*"))
    (folder / "2026-12-01_abcdef0_plans.json").write_text("{broken", encoding="utf-8")
    outcome = gate_against_benchmarks(run, benchmarks, GateSettings())
    assert outcome.status == "bad_baseline" and "2026-12-01_abcdef0_plans.json" in outcome.message
