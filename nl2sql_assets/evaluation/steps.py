"""The steps the asset graph runs, as plain functions over a project and its warehouse.

Each Dagster asset is a few lines that call one of these, so every step can be run and
tested without Dagster: one (config, pass) partition of case runs, a config's scoreboard
over all its passes, the suite's report across configs, and the gate against the newest
comparable record under ``benchmarks/``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from nl2sql_assets.evaluation.history.warehouse import Warehouse
from nl2sql_assets.evaluation.reporting.report import (
    ConfigMeta,
    EvalReport,
    RunFacts,
    RunMeta,
    RunStamp,
    build_report,
)
from nl2sql_assets.evaluation.running.modes import MODES, resolve_config

if TYPE_CHECKING:
    from nl2sql_assets.config import GateSettings
    from nl2sql_assets.evaluation.reporting.gate import GateResult
    from nl2sql_assets.project import Project


@dataclass(frozen=True)
class PartitionRun:
    report: EvalReport
    path: Path
    seconds: float


def run_partition(project: Project, suite_path: Path, config_name: str, pass_index: int, warehouse: Warehouse,
                  *, max_cost_usd: float | None = None, budget: str | None = None) -> PartitionRun:
    """Run one pass of one config over one suite and store its case records in the warehouse.

    ``budget`` names a spend ledger shared by every partition of a backfill, so the dollar
    cap holds across all of them, not per run."""
    mode, llm = resolve_config(config_name, project.config)
    started = time.perf_counter()
    report = project.evals.run(
        [suite_path],
        mode=mode,
        llm={config_name: llm} if llm is not None else None,
        pass_numbers=[pass_index],
        max_cost_usd=max_cost_usd,
        budget=warehouse.ledger(budget) if budget else None,
    )
    seconds = time.perf_counter() - started
    board_name = next(iter(report.configs))
    records = [r.model_copy(update={"config": config_name}) for r in report.configs[board_name].results]
    meta = run_meta_of(report).model_dump(mode="json")
    path = warehouse.write_pass(suite_path.stem, config_name, pass_index, records, meta)
    return PartitionRun(report=report, path=path, seconds=seconds)


def run_meta_of(report: EvalReport) -> RunMeta:
    """The RunMeta a report was built from (so passes stored apart can be merged later)."""
    data = {name: getattr(report, name) for name in RunFacts.model_fields}
    data["configs"] = {
        name: ConfigMeta(models=board.models, planned_cases=board.planned_cases,
                         completed_cases=board.completed_cases,
                         unknown_cost_calls=board.cost.unknown_cost_calls)
        for name, board in report.configs.items()
    }
    return RunMeta.model_validate(data)


def merge_metas(metas: list[RunMeta], config_name: str) -> RunMeta:
    """One RunMeta for several passes of one config: counts summed, the stamp spanning them."""
    if not metas:
        raise ValueError(f"no stored passes for config {config_name!r}")
    first = metas[0]
    planned = sum(sum(c.planned_cases for c in m.configs.values()) for m in metas)
    completed = sum(sum(c.completed_cases for c in m.configs.values()) for m in metas)
    unknown = sum(sum(c.unknown_cost_calls for c in m.configs.values()) for m in metas)
    models = next(iter(first.configs.values())).models if first.configs else {}
    stamp = RunStamp.model_validate({
        **first.run_stamp.model_dump(),
        "started_at": min(m.run_stamp.started_at for m in metas),
        "finished_at": max(m.run_stamp.finished_at for m in metas),
    })
    return first.model_copy(update={
        "passes": len(metas),
        "spent": sum(m.spent for m in metas),
        "stopped": next((m.stopped for m in metas if m.stopped), None),
        "skipped": sum(m.skipped for m in metas),
        "configs": {config_name: ConfigMeta(models=models, planned_cases=planned, completed_cases=completed,
                                            unknown_cost_calls=unknown)},
        "run_stamp": stamp,
    })


def _series(meta: RunMeta) -> tuple:
    """What makes passes comparable: the mode, the suites' digests and the schema fingerprints."""
    return (meta.mode, tuple(sorted(x.digest for x in meta.suites)),
            tuple(sorted(d.schema_fingerprint for d in meta.databases)))


def scoreboard_report(suite_name: str, config_name: str, warehouse: Warehouse) -> EvalReport:
    """A config's board over every stored pass of the newest series (pass^k and determinism need
    them all). Passes stored before the suite or the schema changed are left out, and named in
    ``settings["passes_left_out"]``, rather than mixed into a board they do not belong to."""
    passes = []
    for n in warehouse.passes(suite_name, config_name):
        records, meta = warehouse.read_pass(suite_name, config_name, n)
        if meta is not None:
            passes.append((n, records, RunMeta.model_validate(meta)))
    if not passes:
        raise FileNotFoundError(
            f"no case runs stored for suite {suite_name!r}, config {config_name!r} under {warehouse.root}; "
            "materialise case_runs first"
        )
    newest = max(passes, key=lambda p: p[2].run_stamp.finished_at)
    kept = [p for p in passes if _series(p[2]) == _series(newest[2])]
    left_out = [n for n, _, _ in passes if n not in {k[0] for k in kept}]
    merged = merge_metas([m for _, _, m in kept], config_name)
    if left_out:
        merged = merged.model_copy(update={"settings": {**merged.settings, "passes_left_out": left_out}})
    return build_report([r for _, records, _ in kept for r in records], merged)


def suite_report(suite_name: str, warehouse: Warehouse, configs: list[str] | None = None) -> EvalReport:
    """Every config's board side by side (the report's comparison). Boards are compared within
    one mode, the first in the registry's order that has boards: the LLM configs (mode full) when
    there are any, else plans, else retrieval. The configs of other modes are named in
    ``settings["configs_left_out"]``."""
    names = configs if configs is not None else warehouse.configs(suite_name)
    boards = {name: scoreboard_report(suite_name, name, warehouse) for name in names}
    if not boards:
        raise FileNotFoundError(f"no scoreboards stored for suite {suite_name!r} under {warehouse.root}")
    order = list(MODES)
    mode = min((b.mode for b in boards.values()), key=order.index)
    same = [b for b in boards.values() if b.mode == mode]
    left_out = [name for name, b in boards.items() if b.mode != mode]
    records = [r for b in same for board in b.configs.values() for r in board.results]
    metas = [run_meta_of(b) for b in same]
    settings = dict(metas[0].settings)
    if left_out:
        settings["configs_left_out"] = left_out
    merged = metas[0].model_copy(update={
        "configs": {k: v for m in metas for k, v in m.configs.items()},
        "spent": sum(m.spent for m in metas),
        "passes": max(m.passes for m in metas),
        "settings": settings,
    })
    return build_report(records, merged)


GateStatus = Literal["passed", "regressed", "no_baseline", "series_break", "bad_baseline"]


@dataclass(frozen=True)
class GateOutcome:
    status: GateStatus
    message: str
    result: GateResult | None = None


def gate_against_benchmarks(report: EvalReport, benchmarks: Path, settings: GateSettings) -> GateOutcome:
    """The gate against the newest record of the run's mode, database and config. No record
    yet is not a failure; a record that cannot be read is (the gate must not turn itself off)."""
    from nl2sql_assets.evaluation.reporting.gate import BaselineError, NoBaselineRecord, gate

    if not benchmarks.is_dir():
        return GateOutcome("no_baseline", f"nothing recorded yet: {benchmarks} does not exist")
    try:
        result = gate(report, benchmarks, settings)
    except NoBaselineRecord as exc:
        return GateOutcome("no_baseline", str(exc))
    except BaselineError as exc:
        return GateOutcome("bad_baseline", str(exc))
    if result.series_break:
        return GateOutcome("series_break", f"not comparable with the baseline: {result.series_break}", result)
    if not result.ok:
        return GateOutcome("regressed", "; ".join(result.regressions), result)
    return GateOutcome("passed", "no case flipped from pass to fail", result)


def scoreboard_path(warehouse: Warehouse, suite_name: str, config_name: str) -> Path:
    """Where a config's scoreboard report is stored (the gate and the records read it)."""
    return warehouse.root / "reports" / suite_name / f"{config_name}.json"


@dataclass
class GateSummary:
    """The gate over several configs' stored scoreboards, ready to show."""

    verdict: Literal["passed", "regressed", "warn"] = "passed"
    lines: list[str] = field(default_factory=list)
    lost: dict[str, list[str]] = field(default_factory=dict)  # "config/measure" -> case keys
    gained: dict[str, list[str]] = field(default_factory=dict)
    p_values: dict[str, float] = field(default_factory=dict)


def gate_scoreboards(suite_name: str, configs: list[str], warehouse: Warehouse, benchmarks: Path,
                     settings: GateSettings) -> GateSummary:
    """Gate each config's stored scoreboard. A regression or an unreadable baseline fails; a new
    series (changed suite or schema) only warns, so recording it is not blocked."""
    from nl2sql_assets.evaluation.reporting.report import load_report

    summary = GateSummary()
    failed = warned = False
    for config in configs:
        path = scoreboard_path(warehouse, suite_name, config)
        if not path.exists():
            summary.lines.append(f"{config}: no scoreboard yet")
            continue
        outcome = gate_against_benchmarks(load_report(path), benchmarks, settings)
        summary.lines.append(f"{config}: {outcome.status}: {outcome.message}")
        failed |= outcome.status in ("regressed", "bad_baseline")
        warned |= outcome.status == "series_break"
        if outcome.result is not None:
            for comp in outcome.result.compared:
                key = f"{config}/{comp.measure}"
                summary.lost[key], summary.gained[key] = comp.lost, comp.gained
                summary.p_values[key] = comp.p_value
    summary.verdict = "regressed" if failed else "warn" if warned else "passed"
    return summary
