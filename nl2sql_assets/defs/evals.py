"""Assets for one suite's evaluation: case runs (config x pass), scoreboards (per config) with the
regression gate as a blocking check, the report across configs, and benchmark records."""


import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg

from nl2sql_assets.defs.partitions import CONFIG_X_PASS, CONFIGS
from nl2sql_assets.defs.redaction import redact, safe_metadata
from nl2sql_assets.defs.resources import ProjectResource
from nl2sql_assets.defs.thresholds import board_metadata

EVALS_GROUP = "evals"
LLM_TAG = "nl2sql/llm"  # the run-queue tag of LLM-heavy jobs (dagster.yaml limits it)
BUDGET_TAG = "nl2sql/budget_usd"


class RecordConfig(dg.Config):
    """Run config of benchmark_records: records are written only when ``record`` is true."""

    record: bool = False
    note: str = ""


def build_eval_assets(suite_name: str, suite_path: Path, index_keys: Sequence[dg.AssetKey] = ()) -> list:
    """case_runs, scoreboards (with the gate), eval_report and benchmark_records for one suite."""
    case_runs_key = dg.AssetKey(["case_runs", suite_name])
    scoreboard_key = dg.AssetKey(["scoreboards", suite_name])
    report_key = dg.AssetKey(["eval_report", suite_name])
    records_key = dg.AssetKey(["benchmark_records", suite_name])

    @dg.asset(
        key=case_runs_key,
        deps=[dg.AssetKey(["regenerated_rows", suite_name]), *index_keys],
        partitions_def=CONFIG_X_PASS,
        backfill_policy=dg.BackfillPolicy.multi_run(1),
        pool="llm",
        group_name=EVALS_GROUP,
        kinds={"duckdb"},
        description=f"Every approved case of {suite_name} asked once per role, for one config and pass; "
                    "the case records go to the warehouse.",
    )
    def case_runs(context: dg.AssetExecutionContext, project: ProjectResource) -> dg.MaterializeResult:
        from nl2sql_assets.evaluation.reporting import build_report
        from nl2sql_assets.evaluation.running import RunRequest

        keys = context.partition_key.keys_by_dimension
        config, pass_index = keys["config"], int(keys["pass"])
        cap = context.run.tags.get(BUDGET_TAG)
        # Every run of one backfill draws on one spend ledger, so the cap covers the whole backfill.
        budget = context.run.tags.get("dagster/backfill") or context.run.run_id
        warehouse = project.warehouse
        with project.open() as proj:
            request = RunRequest.for_config(config, proj.config, suites=[suite_path], pass_numbers=[pass_index],
                                            max_cost_usd=float(cap) if cap else None)
            started = time.perf_counter()
            runs = proj.evals.run_cases(request, budget=warehouse.ledger(budget))
            seconds = time.perf_counter() - started
        path = warehouse.write_pass(suite_name, config, pass_index, runs.records, runs.meta)
        report = build_report(runs.records, runs.meta)
        board = next(iter(report.configs.values()))
        s = board.summary.total
        return dg.MaterializeResult(metadata=safe_metadata({
            "passed": s["pass"], "failed": s["fail"], "errors": s["error"], "skipped": s["skip"],
            "execution_accuracy": board.accuracy.execution.rate,
            "overall_accuracy": board.accuracy.overall.rate,
            **board.summary_metrics(),  # what each scorer contributes, plotted over time
            "cost_usd": board.cost.total_usd,
            "seconds": round(seconds, 3),
            "mode": report.mode,
            "stopped": report.stopped or "",
            "records": dg.MetadataValue.path(str(path)),
        }))

    @dg.asset(
        key=scoreboard_key,
        deps=[case_runs_key],
        partitions_def=CONFIGS,
        group_name=EVALS_GROUP,
        kinds={"json"},
        description="One config's board over all its passes: accuracies with 95% Wilson intervals, pass^k, "
                    "determinism, cost and latency.",
    )
    def scoreboard(context: dg.AssetExecutionContext, project: ProjectResource) -> dg.MaterializeResult:
        from nl2sql_assets.evaluation.history import scoreboard_report
        from nl2sql_assets.evaluation.reporting.report import save_report, to_markdown
        from nl2sql_assets.evaluation.running.modes import get_mode

        config = context.partition_key
        report = scoreboard_report(suite_name, config, project.warehouse)
        save_report(report, project.warehouse.scoreboard_path(suite_name, config))
        board = next(iter(report.configs.values()))
        acc = board.accuracy
        return dg.MaterializeResult(metadata=safe_metadata({
            "execution_accuracy": acc.execution.rate,
            "execution_low": acc.execution.low,
            "execution_high": acc.execution.high,
            "lenient_accuracy": acc.lenient.rate,
            "overall_accuracy": acc.overall.rate,
            "pass_k": acc.pass_k.execution.rate,
            "passes": report.passes,
            "cost_per_case_usd": board.cost.per_case_usd,
            "latency_p95_s": board.latency.p95,
            "case_runs": (acc.execution if get_mode(report.mode).executes else acc.overall).total,
            **board.summary_metrics(),
            **board_metadata(report),  # execution success, per-domain rates, coverage, isolation
            "board": dg.MetadataValue.md(to_markdown(board)),
            # Determinism needs two passes; with one there is nothing to plot.
            **({"determinism": board.determinism.rate}
               if board.determinism is not None and board.determinism.rate is not None else {}),
        }))

    @dg.asset_check(
        asset=scoreboard_key,
        name="regression_gate",
        blocking=True,
        partitions_def=CONFIGS,
        description="Case by case against the newest comparable record in benchmarks/: a case that passed "
                    "there and fails now blocks benchmark_records.",
    )
    def regression_gate(context: dg.AssetCheckExecutionContext, project: ProjectResource) -> dg.AssetCheckResult:
        return gate_check_result(project, suite_name, [context.partition_key])

    @dg.asset(
        key=report_key,
        deps=[scoreboard_key],
        group_name=EVALS_GROUP,
        kinds={"json"},
        description="Every config's board side by side, with the cases on which they differ.",
    )
    def eval_report(project: ProjectResource) -> dg.MaterializeResult:
        from nl2sql_assets.evaluation.history import suite_report
        from nl2sql_assets.evaluation.reporting import comparison_markdown, save_report

        report = suite_report(suite_name, project.warehouse)
        out = project.warehouse.suite_report_path(suite_name)
        save_report(report, out)
        return dg.MaterializeResult(metadata=safe_metadata({
            "configs": len(report.configs),
            "mode": report.mode,
            "configs_left_out": dg.MetadataValue.json(report.settings.get("configs_left_out", [])),
            "comparison": dg.MetadataValue.md(comparison_markdown(report)),
            "path": dg.MetadataValue.path(str(out)),
        }))

    @dg.asset(
        key=records_key,
        deps=[scoreboard_key],
        partitions_def=CONFIGS,
        group_name=EVALS_GROUP,
        kinds={"json"},
        description="Writes a benchmark record under benchmarks/ and rebuilds the results page, only when "
                    "launched with `record: true` (and a note).",
    )
    def benchmark_records(context: dg.AssetExecutionContext, config: RecordConfig,
                          project: ProjectResource) -> dg.MaterializeResult:
        from nl2sql_assets.evaluation.history.publish import publish
        from nl2sql_assets.evaluation.reporting.report import load_report

        path = project.warehouse.scoreboard_path(suite_name, context.partition_key)
        # The blocking check guards this asset only when both run together: check again here,
        # so materialising the records alone cannot record a run that regressed.
        gate = gate_check_result(project, suite_name, [context.partition_key])
        if not gate.passed and gate.severity == dg.AssetCheckSeverity.ERROR:
            raise dg.Failure(description=redact(f"not recorded: the regression gate fails: {gate.description}"),
                             metadata=safe_metadata(gate.metadata))
        if not config.record:
            return dg.MaterializeResult(metadata={"recorded": False, "hint": dg.MetadataValue.text(
                "launch with run config {record: true, note: ...} to write a record")})
        result = publish([load_report(path)], note=config.note or None, root=project.root)
        return dg.MaterializeResult(metadata=safe_metadata({
            "recorded": True,
            "records": dg.MetadataValue.json([str(p) for p in result.records]),
        }))

    return [case_runs, scoreboard, regression_gate, eval_report, benchmark_records]


def gate_check_result(project: ProjectResource, suite_name: str, configs: list[str]) -> dg.AssetCheckResult:
    """Gate each config's stored scoreboard; the flipped cases go into the metadata."""
    from nl2sql_assets.evaluation.history import gate_scoreboards

    with project.open() as proj:
        settings = proj.config.evals_config.gate
    summary = gate_scoreboards(suite_name, configs, project.warehouse, project.benchmarks, settings)
    metadata: dict[str, Any] = {
        "lost": dg.MetadataValue.json(summary.lost),
        "gained": dg.MetadataValue.json(summary.gained),
        "lost_count": sum(len(v) for v in summary.lost.values()),
        "gained_count": sum(len(v) for v in summary.gained.values()),
        "summary": dg.MetadataValue.md("\n".join(f"- {line}" for line in summary.lines)),
        **{f"mcnemar_p[{k}]": v for k, v in summary.p_values.items()},
    }
    severity = dg.AssetCheckSeverity.WARN if summary.verdict == "warn" else dg.AssetCheckSeverity.ERROR
    return dg.AssetCheckResult(passed=summary.verdict == "passed", severity=severity, metadata=safe_metadata(metadata),
                               description=redact("; ".join(summary.lines)))


def build_gate_all_check(suite_name: str) -> dg.AssetChecksDefinition:
    """The same gate over every stored scoreboard, unpartitioned, for the sensor's check-only job."""

    @dg.asset_check(asset=dg.AssetKey(["scoreboards", suite_name]), name="regression_gate_all_configs",
                    description="The regression gate for every config with a stored scoreboard "
                                "(run by the new-baseline sensor).")
    def regression_gate_all_configs(project: ProjectResource) -> dg.AssetCheckResult:
        return gate_check_result(project, suite_name, project.warehouse.scoreboards(suite_name))

    return regression_gate_all_configs

