"""The regression gate against the past: a baseline found on disk (a report file, a record file,
or the newest record of the run's mode, database and config under a benchmarks folder), and the
gate over the scoreboards the warehouse stores. The comparison itself is ``reporting.gate``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from nl2sql_assets.config import GateSettings
from nl2sql_assets.errors import UserError
from nl2sql_assets.evaluation.history.records import (
    BenchmarkRecord,
    RecordError,
    database_id,
    iter_records,
    load_record,
    series_key,
)
from nl2sql_assets.evaluation.history.warehouse import Warehouse
from nl2sql_assets.evaluation.reporting.board import EvalReport, load_report
from nl2sql_assets.evaluation.reporting.gate import Baseline, GateResult, compare


class BaselineError(UserError):
    """The baseline is missing, unreadable or holds nothing to compare (the CLI exits 2)."""


class NoBaselineRecord(BaselineError):
    """A benchmarks folder holds no record of the run's mode, database and config yet."""


def gate(report: EvalReport, baseline: EvalReport | BenchmarkRecord | str | Path,
         settings: GateSettings | None = None) -> GateResult:
    """Compare ``report`` with ``baseline``: a report, a record, a file holding either, or a
    benchmarks folder (the newest record per config). Raises BaselineError when the baseline is
    missing or unreadable."""
    return compare(report, [_baseline(item) for item in resolve_baseline(report, baseline)], settings)


def _baseline(item: EvalReport | BenchmarkRecord) -> Baseline:
    if isinstance(item, EvalReport):
        return Baseline.of_report(item)
    mode, digests, fingerprints, _, _, neighbours = series_key(item)
    return Baseline(label=f"record {item.config.name} ({item.recorded_at:%Y-%m-%d})", mode=mode, digests=digests,
                    fingerprints=fingerprints, roles=tuple(sorted(item.roles)), curated=item.curated,
                    boards={item.config.name: item.scoreboard}, incomplete=item.incomplete,
                    suites={d.digest: d.name for d in item.datasets}, neighbours=neighbours,
                    comparator_version=item.comparator_version, policy_check_version=item.policy_check_version)


# ---------------------------------------------------------------- finding the baseline


def _load_file(path: Path) -> EvalReport | BenchmarkRecord:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BaselineError(f"baseline {path}: cannot read it: {exc}") from exc
    if not isinstance(data, dict):
        raise BaselineError(f"baseline {path}: neither an eval report nor a benchmark record")
    try:
        if "scoreboard" in data:
            return load_record(path)
        return load_report(path)
    except ValueError as exc:
        raise BaselineError(f"baseline {exc}") from exc


def _holds(record: BenchmarkRecord, report: EvalReport) -> bool:
    """Whether ``record`` ran every suite (by digest) and datasource of ``report``, and more: the
    gate compares the run with those of its cases (``Baseline.narrowed_to``)."""
    digests = {d.digest for d in record.datasets}
    ids = {d.datasource_id for d in record.databases}
    return ({s.digest for s in report.suites} < digests
            and {d.datasource_id for d in report.databases} <= ids)


def _newest_records(report: EvalReport, folder: Path) -> list[BenchmarkRecord]:
    """Per config of the run, the newest record of its mode, database and config; where there is
    none, the newest record of its mode and config that ran the run's suites among others (a
    one-suite run against a record of every suite)."""
    try:
        records = [record for _, record in iter_records(folder)]
    except RecordError as exc:
        raise BaselineError(f"baseline {exc}") from exc
    db = database_id(report.databases)
    newest: list[BenchmarkRecord] = []
    for config in report.configs:
        of_config = [r for r in records if r.kind == report.mode and r.config.name == config]
        matching = ([r for r in of_config if r.database_id == db]
                    or [r for r in of_config if _holds(r, report)])
        if matching:
            newest.append(matching[-1])  # iter_records is oldest first
    if not newest:
        names = ", ".join(report.configs) or "(none)"
        raise NoBaselineRecord(f"no baseline record for mode {report.mode}, database {db}, "
                            f"config {names} under {folder}/")
    return newest


def expect_baseline(folder: Path, mode: str, configs: Sequence[str] | None = None) -> None:
    """Before a run: raise NoBaselineRecord unless ``folder`` holds a record of ``mode`` (and, when
    they are known, of one of ``configs``). The database is checked by the gate after the run,
    since which datasources a selection reaches is known only then."""
    try:
        records = [record for _, record in iter_records(folder)]
    except RecordError as exc:
        raise BaselineError(f"baseline {exc}") from exc
    of_mode = [r for r in records if r.kind == mode]
    if not of_mode:
        raise NoBaselineRecord(f"{folder}/ holds no record of mode {mode}")
    if configs and not any(r.config.name in configs for r in of_mode):
        raise NoBaselineRecord(f"{folder}/ holds no record of mode {mode} for config {', '.join(configs)} "
                               f"(it has {', '.join(sorted({r.config.name for r in of_mode}))})")


def resolve_baseline(report: EvalReport,
                     baseline: EvalReport | BenchmarkRecord | str | Path) -> list[EvalReport | BenchmarkRecord]:
    """The baseline as reports or records; a folder gives one record per config it has."""
    if isinstance(baseline, (EvalReport, BenchmarkRecord)):
        return [baseline]
    path = Path(baseline)
    if path.is_dir():
        return list(_newest_records(report, path))
    if not path.exists():
        raise BaselineError(f"baseline {path}: no such file or folder")
    return [_load_file(path)]


# ---------------------------------------------------------------- the gate over stored scoreboards


GateStatus = Literal["passed", "regressed", "no_baseline", "series_break", "bad_baseline"]


@dataclass(frozen=True)
class GateOutcome:
    status: GateStatus
    message: str
    result: GateResult | None = None


def gate_against_benchmarks(report: EvalReport, benchmarks: Path, settings: GateSettings) -> GateOutcome:
    """The gate against the newest record of the run's mode, database and config. No record
    yet is not a failure; a record that cannot be read is (the gate must not turn itself off)."""
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
    summary = GateSummary()
    failed = warned = False
    for config in configs:
        path = warehouse.scoreboard_path(suite_name, config)
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
