"""Assets for one suite's evaluation: case runs (config x pass), scoreboards (per config) with the
regression gate as a blocking check, the scoreboards' history, the report across configs, and
benchmark records."""


import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg

from nl2sql_assets.defs.keys import (
    benchmark_records_key,
    case_runs_key,
    dashboard_key,
    eval_report_key,
    regenerated_rows_key,
    scoreboard_history_key,
    scoreboards_key,
    suite_group,
)
from nl2sql_assets.defs.partitions import CONFIG_X_PASS, CONFIGS
from nl2sql_assets.defs.redaction import redact, safe_metadata
from nl2sql_assets.defs.resources import ProjectResource
from nl2sql_assets.defs.shared_boards import pull_scoreboards, share_scoreboard, shared_records
from nl2sql_assets.defs.thresholds import board_metadata

if TYPE_CHECKING:
    from nl2sql_assets.evaluation.reporting.charts import HistoryPoint

LLM_TAG = "nl2sql/llm"  # the run-queue tag of runs that call a paid model (dagster.yaml limits it)
MODE_TAG = "nl2sql/mode"
BUDGET_TAG = "nl2sql/budget_usd"


def run_tags(mode: str) -> dict[str, str]:
    """What a run of case runs uses, as its tags: its mode, and whether it calls a paid model
    (mode full; the key-free modes call none: plans answers from a local gold server, retrieval
    embeds on the CPU). The run queue's limit on ``nl2sql/llm: true`` then holds exactly those."""
    from nl2sql_assets.evaluation.running.modes import get_mode

    return {MODE_TAG: mode, LLM_TAG: "true" if get_mode(mode).needs_key else "false"}


class RecordConfig(dg.Config):
    """Run config of benchmark_records: records are written only when ``record`` is true."""

    record: bool = False
    note: str = ""


def build_eval_assets(suite_name: str, suite_path: Path, index_keys: Sequence[dg.AssetKey] = ()) -> list:
    """Case runs, scoreboards (with the gate), their history, the report and the records of one suite."""
    runs_key = case_runs_key(suite_name)
    scoreboard_key = scoreboards_key(suite_name)
    history_key = scoreboard_history_key(suite_name)
    report_key = eval_report_key(suite_name)
    records_key = benchmark_records_key(suite_name)

    @dg.asset(
        key=runs_key,
        deps=[regenerated_rows_key(suite_name), *index_keys],
        partitions_def=CONFIG_X_PASS,
        backfill_policy=dg.BackfillPolicy.multi_run(1),
        pool="llm",
        group_name=suite_group(suite_name),
        kinds={"duckdb"},
        description=f"Every approved case of {suite_name} asked once per role, for one config and pass; "
                    "the case records go to the warehouse.",
    )
    def case_runs(context: dg.AssetExecutionContext, project: ProjectResource) -> dg.MaterializeResult:
        from nl2sql_assets.evaluation.reporting.report import report_from_records

        config, pass_index = partition_config_pass(context)
        warehouse = project.warehouse
        # Each record goes to the warehouse as its case run finishes; the run keeps only their
        # keys, and the metadata's board is built in one pass over the file: memory stays flat
        # in the number of case runs.
        with project.open() as proj, warehouse.pass_stream(suite_name, config, pass_index) as stream:
            request = partition_request(context, proj.config, suite_path, config, pass_index)
            started = time.perf_counter()
            runs = proj.evals.run_cases(request, budget=warehouse.ledger(budget_name(context)),
                                        on_case=stream.on_case, keep_records=False)
            seconds = time.perf_counter() - started
            if runs.meta.incomplete:
                stream.discard()  # nothing of an incomplete run is stored
            refuse_incomplete(runs)
            path = stream.finish(runs.order)
        warehouse.write_pass_meta(suite_name, config, pass_index, runs.meta)
        report = report_from_records(path, runs.meta)
        return dg.MaterializeResult(metadata=case_runs_metadata(runs, seconds, path, report))

    @dg.asset(
        key=scoreboard_key,
        deps=[runs_key],
        partitions_def=CONFIGS,
        group_name=suite_group(suite_name),
        kinds={"json"},
        description=f"One config's board of {suite_name} over all its passes: accuracies with 95% Wilson intervals, pass^k, "
                    "determinism, cost and latency. Plots by partition compare the configs; "
                    f"{history_key.to_user_string()} plots each config over time.",
    )
    def scoreboard(context: dg.AssetExecutionContext, project: ProjectResource) -> dg.MaterializeResult:
        from nl2sql_assets.evaluation.history import scoreboard_report
        from nl2sql_assets.evaluation.reporting import (
            headline_metrics,
            headline_rows,
            save_report,
            to_markdown,
        )
        from nl2sql_assets.evaluation.running.modes import get_mode

        config = context.partition_key
        # The records of every pass: the file warehouse, or Postgres under a shared profile.
        report = scoreboard_report(suite_name, config, shared_records(project))
        save_report(report, project.warehouse.scoreboard_path(suite_name, config))
        share_scoreboard(project, suite_name, config)
        # One point of the history for every scoreboard materialised, from the UI, a job or a backfill.
        context.log_event(history_point(project, context.instance, suite_name, history_key, config))
        board = next(iter(report.configs.values()))
        acc = board.accuracy
        return dg.MaterializeResult(metadata=safe_metadata({
            "headline": _headline_table(headline_rows(board, report.mode)),
            **headline_metrics(board, report.mode),  # only the measures that apply to the mode
            "passes": report.passes,
            "case_runs": (acc.execution if get_mode(report.mode).executes else acc.overall).total,
            **board.summary_metrics(),
            **board_metadata(report),  # execution success, per-domain rates, coverage, isolation
            "board": dg.MetadataValue.md(to_markdown(board)),
        }))

    @dg.asset_check(
        asset=scoreboard_key,
        name="regression_gate",
        blocking=True,
        partitions_def=CONFIGS,
        description=f"{suite_name}, case by case against the newest comparable record in benchmarks/: a case "
                    "that passed there and fails now blocks benchmark_records.",
    )
    def regression_gate(context: dg.AssetCheckExecutionContext, project: ProjectResource) -> dg.AssetCheckResult:
        pull_scoreboards(project, suite_name)  # the boards built on other machines, under a shared profile
        return gate_check_result(project, suite_name, [context.partition_key])

    scoreboard_history = dg.AssetSpec(
        history_key,
        deps=[scoreboard_key],
        group_name=suite_group(suite_name),
        kinds={"json"},
        description=f"A point for each scoreboard of {suite_name} materialised (however it was launched): "
                    "metadata `charts` draws each measure over time, one chart per measure with every config "
                    "as a series and accuracy's 95% interval as a band; `latest` tables every stored board; "
                    "`point` holds the numbers. To compare configs side by side at one time, see the Plots "
                    f"of {scoreboard_key.to_user_string()} by partition.",
    )

    @dg.asset(
        key=report_key,
        deps=[scoreboard_key],
        group_name=suite_group(suite_name),
        kinds={"json"},
        description=f"Every config's board of {suite_name} side by side, with the cases on which they differ.",
    )
    def eval_report(project: ProjectResource) -> dg.MaterializeResult:
        from nl2sql_assets.evaluation.history import suite_report
        from nl2sql_assets.evaluation.reporting import comparison_markdown, save_report

        report = suite_report(suite_name, shared_records(project))
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
        group_name=suite_group(suite_name),
        kinds={"json"},
        description=f"Writes a benchmark record of {suite_name} under benchmarks/ and rebuilds the results "
                    "page, only when "
                    "launched with `record: true` (and a note).",
    )
    def benchmark_records(context: dg.AssetExecutionContext, config: RecordConfig,
                          project: ProjectResource) -> dg.MaterializeResult:
        from nl2sql_assets.evaluation.history.publish import PublishError, publish
        from nl2sql_assets.evaluation.reporting.board import load_report

        pull_scoreboards(project, suite_name)  # the board may have been built on another machine
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
        try:
            result = publish([load_report(path)], note=config.note or None, root=project.root)
        except PublishError as exc:  # e.g. this scoreboard is recorded already
            raise dg.Failure(description=redact(f"not recorded: {exc}")) from None
        return dg.MaterializeResult(metadata=safe_metadata({
            "recorded": True,
            "records": dg.MetadataValue.json([str(p) for p in result.records]),
            "pages": dg.MetadataValue.json([str(p) for p in result.written]),
        }))

    @dg.asset(
        key=dashboard_key(suite_name),
        deps=[history_key, records_key],
        group_name=suite_group(suite_name),
        kinds={"html"},
        description=f"The results dashboard of {suite_name}: one self-contained HTML page (nothing fetched) over "
                    "its benchmark records and stored boards: accuracy over time with its band, two runs "
                    "case by case with McNemar's p, cost per correct answer, failure reasons, neighbour overturns.",
    )
    def dashboard(project: ProjectResource) -> dg.MaterializeResult:
        from nl2sql_assets.atomic import atomic_write
        from nl2sql_assets.evaluation.history.dashboard import build_dashboard, render_html

        pull_scoreboards(project, suite_name)  # every machine's boards, under a shared profile
        benchmarks = project.root / "benchmarks"
        data = build_dashboard([benchmarks] if benchmarks.is_dir() else [], [project.warehouse.root], [suite_path],
                               only_suite=suite_name, root=project.root)
        out = project.warehouse.root / "dashboards" / f"{suite_name}.html"
        out.parent.mkdir(parents=True, exist_ok=True)
        page = render_html(data, title=f"{suite_name}: results")
        atomic_write(out, page)
        return dg.MaterializeResult(metadata={
            "runs": len(data.runs), "cases": len(data.cases), "size_mb": round(len(page) / 1e6, 2),
            "path": dg.MetadataValue.path(str(out)), "open": dg.MetadataValue.url(out.as_uri()),
        })

    return [case_runs, scoreboard, regression_gate, scoreboard_history, eval_report, benchmark_records, dashboard]


def partition_config_pass(context: dg.OpExecutionContext) -> tuple[str, int]:
    """The (config, pass) of a case_runs partition."""
    keys = context.partition_key.keys_by_dimension
    return keys["config"], int(keys["pass"])


def budget_name(context: dg.OpExecutionContext) -> str:
    """Every run of one backfill draws on one spend ledger, so the cap covers the whole backfill."""
    return context.run.tags.get("dagster/backfill") or context.run.run_id


def partition_request(context: dg.OpExecutionContext, project_config: Any, suite_path: Path, config: str,
                      pass_index: int) -> Any:
    """The RunRequest of one partition: the config's mode, this pass, the run's cap tag."""
    from nl2sql_assets.evaluation.running import RunRequest

    cap = context.run.tags.get(BUDGET_TAG)
    # Every config runs on every suite: a suite holding nothing the config's mode runs (policy
    # probes in mode retrieval) gives an empty partition, every case counted as left out.
    return RunRequest.for_config(config, project_config, suites=[suite_path], pass_numbers=[pass_index],
                                 max_cost_usd=float(cap) if cap else None, allow_empty=True)


def refuse_incomplete(runs: Any) -> None:
    """Fail the partition when case runs failed for the environment (an outage): such a run's
    numbers are not the model's, so nothing of it is stored."""
    if runs.meta.incomplete:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(runs.meta.env_errors.items()))
        raise dg.Failure(description=redact(
            f"incomplete: case runs failed for the environment, not the model ({kinds}); nothing stored. "
            + (runs.meta.breaker or "")))


def case_runs_metadata(runs: Any, seconds: float, path: Path, report: Any = None) -> dict[str, Any]:
    """What a case_runs materialisation shows: counts, the mode's headline, cost, time, the records.
    ``report``: the run's report when the caller built it already (from the streamed records
    file, the run holding none); else it is built from ``runs.records``."""
    from nl2sql_assets.evaluation.reporting import build_report, headline_metrics

    if report is None:
        report = build_report(runs.records, runs.meta)
    board = next(iter(report.configs.values()))
    s = board.summary.total
    return safe_metadata({
        "passed": s["pass"], "failed": s["fail"], "errors": s["error"], "env_errors": s.get("env_error", 0),
        "skipped": s["skip"],
        **headline_metrics(board, report.mode),  # only the measures that apply to the mode
        **board.summary_metrics(),  # what each scorer contributes
        "cost_usd": board.cost.total_usd,
        "seconds": round(seconds, 3),
        "mode": report.mode,
        "stopped": report.stopped or "",
        **_left_out(runs.meta, ran=sum(s.values())),
        "records": dg.MetadataValue.path(str(path)),
    })


def _left_out(meta: Any, ran: int) -> dict[str, Any]:
    """The case runs of kinds the mode does not make (a probe in mode retrieval), and, when
    nothing at all was run, why in words: an empty partition explains itself."""
    from nl2sql_assets.evaluation.running.modes import get_mode

    left = {kind: n for kind, n in sorted(meta.left_out.items()) if n}
    out: dict[str, Any] = {f"left_out[{kind}]": n for kind, n in left.items()}
    if not ran:
        kinds = ", ".join(f"{n} {kind} case run(s)" for kind, n in left.items())
        out["nothing_to_run"] = f"mode {meta.mode}: " + (f"it does not run {kinds}" if kinds
                                                           else get_mode(meta.mode).nothing_selected)
    return out


def _headline_table(rows: list[tuple[str, str]]) -> dg.TableMetadataValue:
    """The headline as a two-column table of formatted cells (percentages, dollars, seconds)."""
    return dg.MetadataValue.table(
        records=[dg.TableRecord({"measure": label, "value": cell}) for label, cell in rows],
        schema=dg.TableSchema(columns=[dg.TableColumn("measure", "string"), dg.TableColumn("value", "string")]),
    )


def history_point(project: ProjectResource, instance: dg.DagsterInstance, suite_name: str,
                  key: dg.AssetKey, config_now: str) -> dg.AssetMaterialization:
    """One point of the history asset for the config just materialised (another config's old
    value is not recorded again: that drew false steps), with charts of every point so far (one
    per measure, every config a series, the interval as a band) and a table of every stored board
    as it stands. A measure that does not apply to a config's mode is absent, never 0."""
    from nl2sql_assets.evaluation.reporting import headline, load_report
    from nl2sql_assets.evaluation.reporting.charts import HistoryPoint, charts_markdown, history_charts
    from nl2sql_assets.evaluation.reporting.headline import display_value

    pull_scoreboards(project, suite_name)  # every machine's boards, under a shared profile
    warehouse = project.warehouse
    point: dict[str, float] = {}
    rows = []
    for config in warehouse.scoreboards(suite_name):
        report = load_report(warehouse.scoreboard_path(suite_name, config))
        board = next(iter(report.configs.values()))
        measures = headline(board, report.mode)
        if config == config_now:
            point = {m.key: display_value(m.key, m.value) for m in measures}
            robust = board.summary_metrics().get("neighbour_robust_accuracy")
            if robust is not None:
                point["neighbour_robust_accuracy"] = display_value("neighbour_robust_accuracy", robust)
        cells = {m.key: m.cell for m in measures}
        rows.append(dg.TableRecord({
            "config": config, "mode": report.mode, "passes": report.passes,
            "accuracy (95% CI)": cells.get("accuracy", "n/a"), "lenient": cells.get("lenient_accuracy", "—"),
            "pass^k": cells.get("pass_k", "—"), "cost per case": cells.get("cost_per_case_usd", "—"),
            "latency p95": cells.get("latency_p95_s", "—"),
            "board from (UTC)": f"{report.run_stamp.finished_at:%Y-%m-%d %H:%M}",
        }))
    columns = [dg.TableColumn("config", "string"), dg.TableColumn("mode", "string"), dg.TableColumn("passes", "int"),
               *[dg.TableColumn(name, "string") for name in ("accuracy (95% CI)", "lenient", "pass^k",
                                                              "cost per case", "latency p95", "board from (UTC)")]]
    points = [*recorded_history(instance, key), HistoryPoint(time.time(), config_now, point)]
    return dg.AssetMaterialization(asset_key=key, metadata={
        "config": config_now,
        # drawn here from numbers and config names alone (no text to redact; redacting base64
        # could only break an image)
        "charts": dg.MetadataValue.md(charts_markdown(history_charts(points))),
        **safe_metadata({
            "latest": dg.MetadataValue.table(records=rows, schema=dg.TableSchema(columns=columns)),
            "point": dg.MetadataValue.json({config_now: point}),
        }),
    })


def recorded_history(instance: dg.DagsterInstance, key: dg.AssetKey, limit: int = 500) -> "list[HistoryPoint]":
    """The history's earlier points, from its materialisations: ``point`` (config -> measures),
    or, in points recorded before it, numbers under ``<config>/<measure>``."""
    from nl2sql_assets.evaluation.reporting.charts import HistoryPoint

    out = []
    for record in instance.fetch_materializations(key, limit=limit).records:
        metadata = record.asset_materialization.metadata if record.asset_materialization else {}
        stored = metadata.get("point")
        if stored is not None and isinstance(stored.value, dict):
            configs = {c: dict(v) for c, v in stored.value.items() if isinstance(v, dict)}
        else:
            configs = {}
            for label, entry in metadata.items():
                config, _, measure = label.partition("/")
                if measure and isinstance(entry.value, int | float):
                    configs.setdefault(config, {})[measure] = float(entry.value)
        for config, values in configs.items():
            out.append(HistoryPoint(record.timestamp, config, values))
    return out


def gate_check_result(project: ProjectResource, suite_name: str, configs: list[str]) -> dg.AssetCheckResult:
    """Gate each config's stored scoreboard; the flipped cases go into the metadata."""
    from nl2sql_assets.evaluation.history import gate_scoreboards

    if not configs:
        return dg.AssetCheckResult(passed=True, description="no scoreboard stored yet: nothing to gate",
                                   metadata={"lost_count": 0, "gained_count": 0})

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

    @dg.asset_check(asset=scoreboards_key(suite_name), name="regression_gate_all_configs",
                    description=f"The regression gate of {suite_name} for every config with a stored "
                                "scoreboard (run by the new-baseline sensor).")
    def regression_gate_all_configs(project: ProjectResource) -> dg.AssetCheckResult:
        pull_scoreboards(project, suite_name)  # every machine's boards, under a shared profile
        return gate_check_result(project, suite_name, project.warehouse.scoreboards(suite_name))

    return regression_gate_all_configs

