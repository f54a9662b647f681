"""The committed results page and README block are exactly what publish makes from the committed records."""

from __future__ import annotations

from pathlib import Path

from nl2sql_assets.evaluation.history.publish import render_pages
from nl2sql_assets.evaluation.history.records import iter_records

ROOT = Path(__file__).resolve().parents[2]


def test_committed_pages_equal_what_publish_renders():
    benchmarks_md, readme = render_pages(ROOT)
    assert (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8") == benchmarks_md, (
        "docs/benchmarks.md is stale: run `nl2sql-assets eval publish` from the repo root")
    assert (ROOT / "README.md").read_text(encoding="utf-8") == readme, (
        "the README's results block is stale: run `nl2sql-assets eval publish` from the repo root")


def test_a_mode_plans_baseline_for_chinook_is_committed():
    records = [record for _, record in iter_records(ROOT / "benchmarks")]
    plans = [r for r in records if r.kind == "plans" and r.database_id == "chinook"]
    assert plans, "CI gates against the newest mode-plans record under benchmarks/plans/chinook/"
    newest = plans[-1]
    assert newest.git_commit != "unknown" and newest.metrics.execution.rate == 1.0
