"""A plugin scorer registered in code owns its numbers: its summary reaches the board, the report's
Markdown, the stored report and the Dagster metadata, with nothing else taught about it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import dagster as dg
import pytest
import yaml
from pydantic import BaseModel, ConfigDict

from nl2sql_assets.defs.factory import build_defs
from nl2sql_assets.defs.partitions import config_pass_key, register_configs
from nl2sql_assets.evaluation.judging.scorers import CaseRun, NoConfig, Score, Scored, ScorerSummary
from nl2sql_assets.evaluation.reporting import EvalReport, build_report, load_report, to_markdown
from nl2sql_assets.evaluation.running import (
    CaseRecord,
    ConfigMeta,
    DatabaseRef,
    RunMeta,
    RunStamp,
    SuiteRef,
    register_scorer,
    unregister_scorer,
)

NAME = "rows_returned"


class RowsDetail(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rows: int


class RowsSummary(ScorerSummary):
    """How many answers came with rows, and how many rows an answer had on average."""

    answers: int
    mean_rows: float

    def metrics(self) -> dict[str, float]:
        return {"rows_per_answer": self.mean_rows, "answers_with_rows": self.answers}

    def markdown(self) -> str:
        return f"Rows returned: {self.mean_rows:.2f} per answer over {self.answers} answers."


class RowsReturned:
    """The plugin: an answer passes when it came with at least one row."""

    interface_version: ClassVar[int] = 1
    config_model: ClassVar[type[BaseModel]] = NoConfig
    detail_model: ClassVar[type[BaseModel]] = RowsDetail
    summary_model: ClassVar[type[ScorerSummary]] = RowsSummary
    modes: ClassVar[frozenset[str]] = frozenset({"plans", "full"})

    @classmethod
    def from_config(cls, cfg: Any) -> RowsReturned:
        return cls()

    def score(self, run: CaseRun) -> Score:
        if run.expected != "allowed" or run.rows is None:
            return Score()
        rows = len(run.rows)
        return Score(value=1.0 if rows else 0.0, passed=rows > 0, detail=RowsDetail(rows=rows).model_dump())

    @classmethod
    def summarize(cls, scores: Sequence[Scored]) -> RowsSummary | None:
        counts = [RowsDetail.model_validate(s.score.detail).rows for s in scores if s.score.passed is not None]
        if not counts:
            return None
        return RowsSummary(answers=len(counts), mean_rows=sum(counts) / len(counts))


@pytest.fixture
def plugin() -> Iterator[None]:
    register_scorer(NAME, RowsReturned)
    try:
        yield
    finally:
        unregister_scorer(NAME)


def _record(case: str, rows: int | None) -> CaseRecord:
    scores = {} if rows is None else {NAME: Score(value=1.0 if rows else 0.0, passed=rows > 0, detail={"rows": rows})}
    return CaseRecord(suite="s", case_id=case, role="analyst", config="plans", mode="plans", expected="allowed",
                      status="pass" if rows else "fail", execution_status="pass" if rows else "fail", scores=scores)


def test_a_plugin_summary_is_on_the_board_in_its_markdown_and_survives_a_round_trip(plugin: None,
                                                                                       tmp_path: Path) -> None:
    stamp = RunStamp(started_at=datetime(2026, 3, 1, tzinfo=UTC), finished_at=datetime(2026, 3, 1, tzinfo=UTC),
                     package_version="0.1.0")
    meta = RunMeta(mode="plans", suites=[SuiteRef(name="s", path="s.yaml", digest="d")], run_stamp=stamp,
                   databases=[DatabaseRef(datasource_id="chinook", engine="sqlite", schema_fingerprint="fp")],
                   configs={"plans": ConfigMeta()}, scorers=["result_match", "outcome", NAME])
    # Three answers with 4, 0 and 2 rows, and one run the plugin did not score.
    report = build_report([_record("c1", 4), _record("c2", 0), _record("c3", 2), _record("c4", None)], meta)
    board = report.configs["plans"]
    assert board.summaries()[NAME] == RowsSummary(answers=3, mean_rows=2.0)
    assert (board.scores[NAME].applied, board.scores[NAME].passed, board.scores[NAME].failed) == (3, 2, 1)
    assert board.summary_metrics() == {"rows_per_answer": 2.0, "answers_with_rows": 3}
    assert "Rows returned: 2.00 per answer over 3 answers." in to_markdown(board)
    saved = load_report(report.save(tmp_path / "report.json"))
    assert saved == report and saved.configs["plans"].summaries()[NAME] == RowsSummary(answers=3, mean_rows=2.0)


def _materialized(result: dg.ExecuteInProcessResult) -> dict[str, dict]:
    mats = [e.step_materialization_data.materialization for e in result.get_asset_materialization_events()]
    return {"/".join(m.asset_key.path): {k: v.value for k, v in m.metadata.items()} for m in mats}


def test_a_plugin_summary_reaches_the_dagster_metadata(plugin: None, demo_project: Path,
                                                       instance: dg.DagsterInstance) -> None:
    evals = demo_project / "evals.yaml"
    data = yaml.safe_load(evals.read_text(encoding="utf-8"))
    data["scorers"] = [*data["scorers"], NAME]
    evals.write_text(yaml.safe_dump(data), encoding="utf-8")
    defs = build_defs(demo_project / "nl2sql.yaml")
    register_configs(instance, ["plans"])

    runs = defs.resolve_job_def("case_runs_job").execute_in_process(
        instance=instance, partition_key=config_pass_key("plans", 1), raise_on_error=False)
    assert runs.success
    case_runs = _materialized(runs)["chinook/case_runs"]
    boards = defs.resolve_job_def("scoreboards_job").execute_in_process(
        instance=instance, partition_key="plans", raise_on_error=False)
    assert boards.success
    scoreboard = _materialized(boards)["chinook/scoreboards"]

    # What the plugin summed up, worked out again from the stored records' row counts.
    stored: EvalReport = load_report(demo_project / "warehouse" / "reports" / "chinook" / "plans.json")
    board = stored.configs["plans"]
    answered = [r.row_count for r in board.results if r.expected == "allowed" and r.row_count is not None]
    assert len(answered) == 93  # the suite's answerable cases, once per role allowed to read them
    expected = RowsSummary(answers=len(answered), mean_rows=sum(answered) / len(answered))
    assert board.summaries()[NAME] == expected
    for metadata in (case_runs, scoreboard):
        assert metadata["rows_per_answer"] == pytest.approx(expected.mean_rows, rel=1e-3)  # 4 significant figures shown
        assert metadata["answers_with_rows"] == expected.answers
    assert f"Rows returned: {expected.mean_rows:.2f} per answer over {expected.answers} answers." in scoreboard["board"]
