"""Case records streamed to JSON Lines as they finish, and the summary report that points at them:
read back, it is the full report; full reports (older ones too) read as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nl2sql_assets.evaluation.reporting.board import EvalReport, load_report, save_report, save_summary
from nl2sql_assets.evaluation.reporting.report import build_report, report_from_records
from nl2sql_assets.evaluation.reporting.streamed import RecordStream, records_path_for
from nl2sql_assets.evaluation.running.results import CaseRecord, ConfigMeta, record_key
from tests.unit.test_report import meta, rec, table_of_six


def _meta():
    return meta(configs={"default": ConfigMeta(), "mini": ConfigMeta()})


def _report():
    records = [*table_of_six(), rec("c1", "pass", config="mini"), rec("c2", "fail", config="mini")]
    return build_report(records, _meta())


def all_records(report: EvalReport) -> list[CaseRecord]:
    return [r for board in report.configs.values() for r in board.results]


def test_records_are_on_disk_as_each_finishes_and_end_in_report_order(tmp_path: Path) -> None:
    report = _report()
    records = all_records(report)
    out = tmp_path / "eval_full.json"
    with RecordStream(records_path_for(out)) as stream:
        for n, record in enumerate(reversed(records), 1):  # finishing in another order than the report's
            stream.on_case(record.config, record, 0.0)
            lines = stream.partial.read_text(encoding="utf-8").splitlines()
            assert len(lines) == n and json.loads(lines[-1])["case_id"] == record.case_id
        path = stream.finish(record_key(r) for r in records)
    assert path == tmp_path / "eval_full.records.jsonl" and not stream.partial.exists()
    stored = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [(r["config"], r["case_id"], r["role"]) for r in stored] == [(r.config, r.case_id, r.role) for r in records]


def test_a_summary_is_small_and_reads_back_as_the_full_report(tmp_path: Path) -> None:
    report = _report()
    out = tmp_path / "eval_full.json"
    with RecordStream(records_path_for(out)) as stream:
        for record in all_records(report):
            stream.on_case(record.config, record, 0.0)
        records = stream.finish(record_key(r) for r in all_records(report))
    save_summary(report, out, records)
    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["records_file"] == "eval_full.records.jsonl"
    assert all(board["results"] == [] for board in data["configs"].values())
    assert load_report(out) == report  # the gate, thresholds and publish read it through load_report


def test_a_full_report_without_records_file_reads_as_before(tmp_path: Path) -> None:
    report = _report()
    path = save_report(report, tmp_path / "eval_full.json")
    assert "records_file" not in json.loads(path.read_text(encoding="utf-8"))  # the older format, unchanged
    assert load_report(path) == report


def test_a_summary_whose_records_are_gone_names_the_file(tmp_path: Path) -> None:
    report = _report()
    out = tmp_path / "eval_full.json"
    missing = tmp_path / "eval_full.records.jsonl"
    save_summary(report, out, missing)
    with pytest.raises(ValueError, match=r"cannot read its case records .*eval_full\.records\.jsonl"):
        load_report(out)
    missing.write_text('{"not": "a record"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"eval_full\.records\.jsonl, line 1: not a case record"):
        load_report(out)


def test_boards_built_from_the_records_file_are_those_built_from_the_records(tmp_path: Path) -> None:
    report = _report()
    with RecordStream(records_path_for(tmp_path / "eval_full.json")) as stream:
        for record in reversed(all_records(report)):
            stream.on_case(record.config, record, 0.0)
        path = stream.finish(record_key(r) for r in all_records(report))
    streamed = report_from_records(path, _meta())
    assert all(board.results == [] for board in streamed.configs.values())  # no record held
    with_results = {name: board.model_copy(update={"results": report.configs[name].results})
                    for name, board in streamed.configs.items()}
    assert streamed.model_copy(update={"configs": with_results}) == report


def test_a_discarded_stream_leaves_nothing_and_an_older_records_file_untouched(tmp_path: Path) -> None:
    records = all_records(_report())
    path = tmp_path / "pass=1.jsonl"
    path.write_text("the earlier run\n", encoding="utf-8")
    with RecordStream(path) as stream:
        for record in records:
            stream.on_case(record.config, record, 0.0)
        stream.discard()
    assert path.read_text(encoding="utf-8") == "the earlier run\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pass=1.jsonl"]
