"""Mode retrieval end to end on a fresh demo, with no API key: routing and schema retrieval on the
local ONNX embedder for every answerable case and every role allowed to read it, the report's
recall and routing, the run-scope events, and the CLI gate against the committed baseline.

It checks that the run covers what it should and reports recall and routing, not what the recall
is: the committed record and the CLI's gate hold the figures themselves.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from nl2sql_assets import Project, paths
from nl2sql_assets.cli import main
from nl2sql_assets.engine.events import EVAL_CASE, EVAL_FINISHED, RUN_FINISHED, RUN_STARTED, Event
from nl2sql_assets.evaluation.history.records import iter_records
from nl2sql_assets.evaluation.reporting.board import load_report
from nl2sql_assets.evaluation.running import gold_llm
from nl2sql_assets.evaluation.running.shards import LAYOUT_SETTINGS
from nl2sql_assets.evaluation.suites import load_suite, suite_digest

REPO = paths.repo_root() or Path(__file__).resolve().parents[2]


@pytest.fixture
def keyless(monkeypatch: pytest.MonkeyPatch) -> None:
    """No provider key and no CI variable; the gold LLM server must not be started."""
    for name in list(os.environ):
        if name.upper().endswith("_API_KEY"):
            monkeypatch.delenv(name)
    monkeypatch.delenv("CI", raising=False)

    def refuse(self: gold_llm.GoldLLMServer) -> gold_llm.GoldLLMServer:
        raise AssertionError("mode retrieval must not start the gold LLM server")

    monkeypatch.setattr(gold_llm.GoldLLMServer, "start", refuse)


def test_mode_retrieval_covers_every_allowed_role_and_reports_recall_and_routing(
    demo_project: Path, keyless: None
) -> None:
    suite = load_suite(demo_project / "suites" / "chinook.yaml")
    expected = {(c.id, role) for c in suite.cases if c.status == "approved" and c.answerable
                for role, outcome in c.outcome.items() if outcome == "allowed"}
    assert len({case for case, _ in expected}) == 43 and len(expected) == 93

    project = Project.load(demo_project / "nl2sql.yaml")
    events: list[Event] = []
    project.bus.subscribe("*", events.append)
    with project:
        report = project.evals.run(mode="retrieval")

    # ------------------------------------------------------------ the run and its settings
    assert (report.mode, report.spent, report.curated, report.stopped) == ("retrieval", 0.0, False, None)
    assert report.scorers == ["retrieval_recall", "routing"]  # the others cannot score mode retrieval
    assert list(report.configs) == ["retrieval"]
    assert [d.datasource_id for d in report.databases] == ["chinook"]
    settings = report.settings
    assert (settings["k_tables"], settings["k_columns"], settings["mmr_lambda"]) == (8, 12, 0.5)
    assert settings["full_snapshot_max_tables"] == 0  # Chinook's 11 tables are searched, not sent whole
    assert settings["embedder"].startswith("all-MiniLM-L6-v2-onnx-int8:")

    # ------------------------------------------------------------ every case, every allowed role
    board = report.configs["retrieval"]
    records = board.results
    assert {(r.case_id, r.role) for r in records} == expected and len(records) == 93
    assert board.planned_cases == board.completed_cases == 93
    assert board.summary.total["error"] == 0 and board.summary.total["skip"] == 0
    for r in records:
        recall, routing = r.scores["retrieval_recall"], r.scores["routing"]
        detail = recall.detail
        assert 0.0 <= detail["table_recall"] <= 1.0 and 0.0 <= detail["column_recall"] <= 1.0
        assert recall.value == detail["column_recall"]
        assert r.retrieval is not None and 1 <= len(r.retrieval) <= 8
        assert detail["tables_sent"] == len(r.retrieval)
        assert r.routed is not None and sorted(r.routed) == ["chinook", "support", "webanalytics"]
        assert set(routing.detail) >= {"top1", "shortlist", "routed"}
        perfect = detail["table_recall"] == 1.0 and detail["column_recall"] == 1.0
        assert (r.status == "pass") == (perfect and routing.passed is True), (r.case_id, r.role)
        assert r.execution_status is None and r.sql is None and r.row_count is None and r.answer is None
        assert r.usage == {} and r.cost_usd == 0.0  # no model call
        assert set(r.timings) == {"router", "retriever"}

    # ------------------------------------------------------------ the board's summaries
    retrieval = board.retrieval
    assert retrieval is not None and retrieval.cases == 93
    assert retrieval.table_recall > 0.8
    assert 0.0 <= retrieval.column_recall <= 1.0
    assert 0 <= retrieval.perfect_columns <= retrieval.perfect_tables <= 93
    assert 1.0 <= retrieval.tables_sent <= 8.0 and retrieval.columns_sent >= retrieval.tables_sent
    assert board.routing is not None and board.routing.cases == 93
    assert board.accuracy.overall.total == 93
    assert board.accuracy.execution.total == 0  # nothing executes

    # ------------------------------------------------------------ run scopes and eval events
    started = [e for e in events if e.topic == RUN_STARTED]
    finished = [e for e in events if e.topic == RUN_FINISHED]
    assert len(started) == len(finished) == 93
    assert {(e.payload["context"]["case_id"], e.payload["role"]) for e in started} == expected
    assert {e.run_id for e in started} == {e.run_id for e in finished}
    assert all(e.payload["status"] == "success" for e in finished)
    assert Counter(e.topic for e in events)[EVAL_CASE] == 93
    (done,) = [e for e in events if e.topic == EVAL_FINISHED]
    assert (done.payload["mode"], done.payload["cases"], done.payload["spent"]) == ("retrieval", 93, 0.0)

    # ------------------------------------------------------------ the indexes it built: its own copies
    for ds in ("chinook", "support", "webanalytics"):
        index = json.loads((demo_project / "warehouse" / "eval_schema_index" / f"{ds}.json").read_text())
        assert index["dimensions"] == 384 and index["model"] == settings["embedder"]
        assert not (demo_project / "warehouse" / "schema_index" / f"{ds}.json").exists()  # the serving folder
    assert report.left_out == {"probe": 37}  # the suite's policy probes: nothing to retrieve


def test_cli_mode_retrieval_exits_0_against_the_committed_baseline(
    demo_project: Path, keyless: None, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    committed = [r for _, r in iter_records(REPO / "benchmarks") if r.kind == "retrieval"
                 and r.database_id == "chinook"]
    assert committed, "CI gates against the newest record under benchmarks/retrieval/chinook/"
    newest = committed[-1]
    out_file = tmp_path / "eval_retrieval.json"
    baseline = REPO / "benchmarks"
    digest = suite_digest(demo_project / "suites" / "chinook.yaml")
    if digest not in {d.digest for d in newest.datasets}:
        # The suite changed since the newest record: CI's gate says so (exit 2) until a run of the
        # new series is recorded; gate against one published into a copy of benchmarks/ instead.
        code = main(["--config", str(demo_project / "nl2sql.yaml"), "eval", "run", "--mode", "retrieval",
                     "--baseline", str(baseline), "--out", str(out_file)])
        captured = capsys.readouterr()
        assert code == 2 and "gate: not comparable: another suite digest" in captured.err, captured.err
        root = tmp_path / "repo"
        (root / "benchmarks").mkdir(parents=True)
        (root / "README.md").write_text("<!-- results:start -->\n<!-- results:end -->\n", encoding="utf-8")
        assert main(["eval", "publish", str(out_file), "--note", "new series", "--root", str(root)]) == 0
        baseline = root / "benchmarks"
        capsys.readouterr()
    code = main(["--config", str(demo_project / "nl2sql.yaml"), "eval", "run", "--mode", "retrieval",
                 "--baseline", str(baseline), "--out", str(out_file)])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert "table recall" in captured.out and "routing top-1" in captured.out
    assert "gate [retrieval/status]: lost 0 []" in captured.out and "gate: ok" in captured.out
    report = load_report(out_file)
    # Same suite, schema and settings as the record (how many processes made the case runs aside):
    # every case keeps its verdict.
    asked = {k: v for k, v in report.settings.items() if k not in LAYOUT_SETTINGS}
    assert asked == {k: v for k, v in newest.settings.items() if k not in LAYOUT_SETTINGS}
    assert report.settings["processes"] >= 1
    before = {f"{r.case_id}@{r.role}": r.status for r in newest.scoreboard.results}
    after = {f"{r.case_id}@{r.role}": r.status for r in report.configs["retrieval"].results}
    assert after == before
