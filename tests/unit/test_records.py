"""Benchmark records and publish: file names, no overwrites, git fields, byte-identical pages."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from nl2sql_assets import paths as paths_mod
from nl2sql_assets.evaluation.history.publish import END, START, publish, render_pages
from nl2sql_assets.evaluation.history.records import (
    BenchmarkRecord,
    iter_records,
    load_record,
    records_from_report,
    series_key,
    write_record,
)
from nl2sql_assets.evaluation.reporting.board import EvalReport
from nl2sql_assets.evaluation.reporting.report import build_report
from nl2sql_assets.evaluation.running.results import (
    CaseRecord,
    ConfigMeta,
    DatabaseRef,
    RunMeta,
    RunStamp,
    SuiteRef,
)
from nl2sql_assets.paths import git_info


def report(*, mode: str = "plans", day: int = 1, commit: str = "abcdef0123456789" * 2 + "abcdef01",
           dirty: bool | str = False, passed: int = 3, total: int = 4, digest: str = "d" * 64,
           databases: tuple[str, ...] = ("chinook",), configs: tuple[str, ...] | None = None,
           cost: float = 0.0) -> EvalReport:
    names = configs or ({"plans": "plans", "retrieval": "retrieval"}.get(mode, "default"),)
    records = [
        CaseRecord(suite="chinook", case_id=f"c{i}", role="analyst", config=name, mode=mode,
                   expected="allowed", status="pass" if i < passed else "fail",
                   execution_status=None if mode == "retrieval" else "pass" if i < passed else "fail",
                   cost_usd=cost,
                   latency_s=0.5 + i, reason="" if i < passed else "result_match: rows differ")
        for name in names for i in range(total)
    ]
    stamp = RunStamp(started_at=datetime(2026, 4, day, 8, 15, tzinfo=UTC),
                     finished_at=datetime(2026, 4, day, 8, 20, tzinfo=UTC),
                     package_version="0.1.0", git_commit=commit, git_dirty=dirty)
    meta = RunMeta(mode=mode, suites=[SuiteRef(name="chinook", path="suites/chinook.yaml", digest=digest)],
                   roles=["analyst"], curated=mode == "full", run_stamp=stamp,
                   databases=[DatabaseRef(datasource_id=d, engine="sqlite", schema_fingerprint=f"fp-{d}",
                                          tables=11, columns=64) for d in databases],
                   configs={n: ConfigMeta(models={"planner": "openai/gpt-x"}) for n in names})
    return build_report(records, meta)


# ---------------------------------------------------------------- records


def test_record_fields_come_from_the_report() -> None:
    [record] = records_from_report(report(mode="full", passed=3, total=4, cost=0.02), note="slim prompts")
    assert record.kind == "full"
    assert record.recorded_at == datetime(2026, 4, 1, 8, 15, tzinfo=UTC)  # the run's stamp, not now
    assert record.engine_version == "0.1.0"
    assert record.git_commit.startswith("abcdef0") and record.git_dirty is False
    assert record.note == "slim prompts"
    assert record.dataset.name == "chinook" and record.database.datasource_id == "chinook"
    assert record.config.name == "default" and record.config.models == {"planner": "openai:gpt-x"}
    m = record.metrics
    assert (m.execution.passed, m.execution.total) == (3, 4)
    assert m.dollars.per_case_usd == pytest.approx(0.02)
    assert len(record.scoreboard.results) == 4  # the whole board: a full baseline
    data = json.loads(record.to_json())
    assert data["schema"] == 2 and "schema_version" not in data
    assert BenchmarkRecord.model_validate_json(record.to_json()) == record
    # one line per case record, so a diff between records reads case by case
    case_lines = [line for line in record.to_json().splitlines() if '"case_id"' in line]
    assert len(case_lines) == 4 and all(line.startswith('      {"suite"') for line in case_lines)


def test_one_record_per_config() -> None:
    recs = records_from_report(report(mode="full", configs=("big", "mini")))
    assert [r.config.name for r in recs] == ["big", "mini"]


def test_file_naming(tmp_path: Path) -> None:
    path = write_record(records_from_report(report())[0], tmp_path)
    assert path.relative_to(tmp_path).as_posix() == "benchmarks/plans/chinook/2026-04-01_abcdef0_plans.json"
    several = write_record(records_from_report(report(mode="retrieval", databases=("webanalytics", "chinook",
                                                                                   "support")))[0], tmp_path)
    assert several.relative_to(tmp_path).as_posix() == (
        "benchmarks/retrieval/chinook-support-webanalytics/2026-04-01_abcdef0_retrieval.json")
    unknown = write_record(records_from_report(report(mode="full", commit="unknown", dirty="unknown"))[0],
                           tmp_path)
    assert unknown.name == "2026-04-01_unknown_default.json"


def test_taken_names_get_a_number_and_nothing_is_overwritten(tmp_path: Path) -> None:
    first = records_from_report(report(passed=4))[0]
    second = records_from_report(report(passed=1))[0]
    paths = [write_record(first, tmp_path), write_record(second, tmp_path), write_record(second, tmp_path)]
    assert [p.name for p in paths] == ["2026-04-01_abcdef0_plans.json", "2026-04-01_abcdef0_plans-2.json",
                                       "2026-04-01_abcdef0_plans-3.json"]
    assert load_record(paths[0]) == first  # the first file still holds the first record
    assert load_record(paths[1]) == second
    assert [path.name for path, _ in iter_records(tmp_path / "benchmarks")] == [p.name for p in paths]


def test_records_are_listed_oldest_first(tmp_path: Path) -> None:
    for day in (9, 2, 5):
        write_record(records_from_report(report(day=day))[0], tmp_path)
    days = [r.recorded_at.day for _, r in iter_records(tmp_path / "benchmarks")]
    assert days == [2, 5, 9]
    assert list(iter_records(tmp_path / "nothing-here")) == []


def test_git_info_in_this_checkout() -> None:
    commit, dirty = git_info()
    if paths_mod.repo_root() is None:
        assert (commit, dirty) == ("unknown", "unknown")
    else:
        assert len(commit) == 40 and isinstance(dirty, bool)


def test_git_fields_are_unknown_without_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(paths_mod, "repo_root", lambda: None)
    assert git_info() == ("unknown", "unknown")
    monkeypatch.undo()
    monkeypatch.setattr(paths_mod.shutil, "which", lambda name: None)
    assert git_info() == ("unknown", "unknown")
    assert git_info(tmp_path) == ("unknown", "unknown")  # a folder outside any checkout
    [record] = records_from_report(report(commit="unknown", dirty="unknown"))
    data = json.loads(record.to_json())
    assert data["git_commit"] == "unknown" and data["git_dirty"] == "unknown"


def test_series_key() -> None:
    plans = records_from_report(report())[0]
    assert series_key(plans) == ("plans", ("d" * 64,), ("fp-chinook",), (), None, None)
    full = report(mode="full")
    assert series_key(full) == ("full", ("d" * 64,), ("fp-chinook",), ("analyst",), True, None)
    assert series_key(records_from_report(full)[0]) == series_key(full)


# ---------------------------------------------------------------- publish


README = "# Project\n\nIntro text.\n\n" + START + "\nold table\n" + END + "\n\n## Licence\n\nMIT\n"


def test_publish_writes_records_and_pages(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text(README, encoding="utf-8")
    result = publish([report(day=3, passed=4), report(day=1, passed=2)], note="first | try", root=tmp_path)
    assert len(result.records) == 2
    page = (tmp_path / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert "## plans · chinook · plans · suite dddddddddddd" in page
    # rows oldest first whatever order they were recorded in
    assert page.index("2026-04-01 08:15") < page.index("2026-04-03 08:15")
    assert "50.0% (15.0%–85.0%)" in page and "100.0% (51.0%–100.0%)" in page
    assert "first \\| try" in page
    readme = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert "old table" not in readme
    assert readme.startswith("# Project\n\nIntro text.\n\n" + START + "\n")
    assert readme.endswith(END + "\n\n## Licence\n\nMIT\n")
    block = readme[readme.index(START):readme.index(END)]
    assert "2026-04-03 08:15" in block and "2026-04-01 08:15" not in block  # newest per series only
    assert (page, readme) == render_pages(tmp_path)


def test_publish_twice_gives_identical_bytes(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text(README, encoding="utf-8")
    publish([report(day=1), report(mode="retrieval", day=2), report(mode="full", configs=("big", "mini"))],
            root=tmp_path)
    page = (tmp_path / "docs" / "benchmarks.md").read_bytes()
    readme = (tmp_path / "README.md").read_bytes()
    publish([], root=tmp_path)
    assert (tmp_path / "docs" / "benchmarks.md").read_bytes() == page
    assert (tmp_path / "README.md").read_bytes() == readme
    assert page.count(b"\n## ") == 4  # plans, retrieval, full/big, full/mini
    text = page.decode("utf-8")
    retrieval = text[text.index("## retrieval"):]
    # retrieval executes nothing: its accuracy is the share of cases that passed
    assert "| accuracy (95% CI) |" in retrieval and "| 2026-04-02 08:15 | 75.0% (30.1%–95.4%) | — |" in retrieval


def test_publish_from_a_folder_of_reports(tmp_path: Path) -> None:
    reports = tmp_path / "eval-reports"
    report(day=2).save(reports / "eval_plans.json")
    report(mode="retrieval", day=2).save(reports / "eval_retrieval.json")
    result = publish([], from_dirs=[reports], note="CI baseline", root=tmp_path)
    assert sorted(p.parent.name for p in result.records) == ["chinook", "chinook"]
    assert all(load_record(p).note == "CI baseline" for p in result.records)


def test_a_new_suite_digest_starts_another_series(tmp_path: Path) -> None:
    publish([report(day=1), report(day=2, digest="e" * 64)], root=tmp_path)
    page = (tmp_path / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert "suite dddddddddddd" in page and "suite eeeeeeeeeeee" in page


def test_readme_without_markers_gets_a_results_section(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# Project\n\nText.", encoding="utf-8")
    publish([report()], root=tmp_path)
    readme = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert readme.startswith("# Project\n\nText.\n\n## Results\n\n" + START + "\n")
    assert readme.endswith(END + "\n")
    publish([], root=tmp_path)
    assert (tmp_path / "README.md").read_text(encoding="utf-8") == readme  # replaced, not appended again


def test_no_records_yet(tmp_path: Path) -> None:
    page, readme = render_pages(tmp_path)
    assert "No runs recorded yet." in page
    assert START in readme and END in readme
