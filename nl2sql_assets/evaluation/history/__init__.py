"""History: the committed benchmark records and the pages made from them, the warehouse of runs
(the one owner of its paths) and the boards built from it, and the regression gate against a
baseline found on disk."""

from nl2sql_assets.evaluation.history.baselines import (
    BaselineError,
    GateOutcome,
    GateSummary,
    NoBaselineRecord,
    expect_baseline,
    gate,
    gate_against_benchmarks,
    gate_scoreboards,
    resolve_baseline,
)
from nl2sql_assets.evaluation.history.boards import merge_metas, scoreboard_report, stored_board, suite_report
from nl2sql_assets.evaluation.history.publish import PublishError, PublishResult, publish, render_pages
from nl2sql_assets.evaluation.history.records import (
    BenchmarkRecord,
    RecordError,
    iter_records,
    load_record,
    records_from_report,
    series_key,
    write_record,
)
from nl2sql_assets.evaluation.history.warehouse import SpendLedger, Warehouse

__all__ = [
    "BaselineError",
    "BenchmarkRecord",
    "GateOutcome",
    "GateSummary",
    "NoBaselineRecord",
    "PublishError",
    "PublishResult",
    "RecordError",
    "SpendLedger",
    "Warehouse",
    "expect_baseline",
    "gate",
    "gate_against_benchmarks",
    "gate_scoreboards",
    "iter_records",
    "load_record",
    "merge_metas",
    "publish",
    "records_from_report",
    "render_pages",
    "resolve_baseline",
    "scoreboard_report",
    "series_key",
    "stored_board",
    "suite_report",
    "write_record",
]
