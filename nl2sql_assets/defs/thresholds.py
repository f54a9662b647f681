"""The threshold gates as a Dagster asset check on each config's scoreboard, and the board numbers
the scoreboard plots beside accuracy (execution success, per-domain rates, coverage, isolation)."""

from typing import Any

import dagster as dg

from nl2sql_assets.defs.keys import scoreboards_key
from nl2sql_assets.defs.partitions import CONFIGS
from nl2sql_assets.defs.redaction import redact, safe_metadata
from nl2sql_assets.defs.resources import ProjectResource


def board_metadata(report: Any) -> dict[str, Any]:
    """What a scoreboard adds to its metadata for the board of ``report`` (one config): numbers to
    plot (execution success, per-domain rates, coverage counts) and the per-domain table and
    isolation block as Markdown."""
    from nl2sql_assets.evaluation.reporting.coverage import domains_markdown

    board = next(iter(report.configs.values()))
    out: dict[str, Any] = {}

    def plot(key: str, rate: Any) -> None:  # a rate over nothing is no point, never a 0
        if rate is not None and rate.rate is not None:
            out[key] = rate.rate

    plot("execution_success", board.execution_success)
    for domain, rates in board.by_domain.items():
        plot(f"execution_success[{domain}]", rates.execution_success)
        plot(f"execution_accuracy[{domain}]", rates.accuracy)
    if board.by_domain:
        out["domains"] = dg.MetadataValue.md(domains_markdown(board.by_domain))
    if board.coverage is not None:
        out.update(query_count=board.coverage.query_count, probe_count=board.coverage.probe_count,
                   unique_case_count=board.coverage.unique_case_count)
    if report.left_out:
        out["left_out"] = dg.MetadataValue.json(report.left_out)
    if report.isolation is not None:
        out["isolation"] = dg.MetadataValue.md(report.isolation.markdown())
    return out


def threshold_check_result(project: ProjectResource, suite_name: str, config: str) -> dg.AssetCheckResult:
    """evals.yaml's thresholds on the config's stored scoreboard; each miss named with its value."""
    from nl2sql_assets.evaluation.reporting.board import load_report
    from nl2sql_assets.evaluation.reporting.thresholds import check_thresholds

    with project.open() as proj:
        settings = proj.config.evals_config.thresholds
    path = project.warehouse.scoreboard_path(suite_name, config)
    if not settings.set():
        return dg.AssetCheckResult(passed=True, description="no thresholds set in evals.yaml")
    if not path.exists():
        return dg.AssetCheckResult(passed=False, description=f"no scoreboard stored for config {config!r}")
    result = check_thresholds(load_report(path), settings)
    metadata: dict[str, Any] = {
        "missed": len(result.misses),
        "checks": dg.MetadataValue.md("\n".join(f"- {c.line()}" for c in result.checks)),
        **{f"measured[{c.name}]": c.measured for c in result.checks if c.measured is not None},
    }
    return dg.AssetCheckResult(
        passed=result.ok, severity=dg.AssetCheckSeverity.ERROR, metadata=safe_metadata(metadata),
        description=redact("; ".join(c.line() for c in result.misses) or "every threshold met or not measured"),
    )


def build_threshold_check(suite_name: str) -> dg.AssetChecksDefinition:
    """The ``thresholds`` check on ``scoreboards/<suite>``, per config (not blocking: a run below a
    threshold is still worth recording; the check says so in the UI and the CLI exits 1)."""

    @dg.asset_check(
        asset=scoreboards_key(suite_name),
        name="thresholds",
        partitions_def=CONFIGS,
        description=f"evals.yaml's thresholds (execution success, accuracy, lenient accuracy, policy recall and "
                    f"precision, p95 latency, cost per case) on the config's board of {suite_name}; each miss is "
                    "named with its value.",
    )
    def thresholds(context: dg.AssetCheckExecutionContext, project: ProjectResource) -> dg.AssetCheckResult:
        return threshold_check_result(project, suite_name, context.partition_key)

    return thresholds
