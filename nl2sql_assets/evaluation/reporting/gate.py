"""The regression gate: compare a run with a baseline case by case, not headline to headline.

Only comparable runs are compared (same mode, suite digests, schema fingerprints, roles and, in
mode full, curated answers). Per config both runs have, it counts the cases that flipped each
way on execution accuracy, tests the flips with McNemar's exact test and checks cost per case.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

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
from nl2sql_assets.evaluation.reporting import stats
from nl2sql_assets.evaluation.reporting.report import Board, EvalReport, case_key, load_report
from nl2sql_assets.evaluation.running.modes import Measure, get_mode
from nl2sql_assets.evaluation.running.results import CaseRecord


class BaselineError(UserError):
    """The baseline is missing, unreadable or holds nothing to compare (the CLI exits 2)."""


class NoBaselineRecord(BaselineError):
    """A benchmarks folder holds no record of the run's mode, database and config yet."""


class ConfigComparison(BaseModel):
    """One config and measure. Case keys are ``case_id@role``; a key passed only when every
    pass passed. Accuracies here are over case keys, not runs."""

    model_config = ConfigDict(extra="forbid")

    config: str
    measure: Measure
    lost: list[str] = Field(default_factory=list)  # passed in the baseline, fail now
    gained: list[str] = Field(default_factory=list)  # failed in the baseline, pass now
    p_value: float = 1.0
    baseline_accuracy: float = 0.0
    accuracy: float = 0.0
    baseline_cost_per_case: float = 0.0
    cost_per_case: float = 0.0


class GateResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ok: bool
    regressions: list[str] = Field(default_factory=list)
    series_break: str | None = None
    compared: list[ConfigComparison] = Field(default_factory=list)


@dataclass
class _Side:
    """What the gate needs from either side: the series identity and the boards by config."""

    label: str
    mode: str
    digests: tuple[str, ...]
    fingerprints: tuple[str, ...]
    roles: tuple[str, ...]
    curated: bool
    boards: dict[str, Board] = field(default_factory=dict)


def _from_report(report: EvalReport, label: str) -> _Side:
    return _Side(label=label, mode=report.mode, digests=tuple(sorted(s.digest for s in report.suites)),
                 fingerprints=tuple(sorted(d.schema_fingerprint for d in report.databases)),
                 roles=tuple(sorted(report.roles)), curated=report.curated, boards=dict(report.configs))


def _from_record(record: BenchmarkRecord, label: str) -> _Side:
    mode, digests, fingerprints, _, _ = series_key(record)
    return _Side(label=label, mode=mode, digests=digests, fingerprints=fingerprints,
                 roles=tuple(sorted(record.roles)), curated=record.curated,
                 boards={record.config.name: record.scoreboard})


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


def _newest_records(report: EvalReport, folder: Path) -> list[BenchmarkRecord]:
    """Per config of the run, the newest record of its mode, database and config."""
    try:
        records = [record for _, record in iter_records(folder)]
    except RecordError as exc:
        raise BaselineError(f"baseline {exc}") from exc
    db = database_id(report.databases)
    newest: list[BenchmarkRecord] = []
    for config in report.configs:
        matching = [r for r in records if r.kind == report.mode and r.database_id == db
                    and r.config.name == config]
        if matching:
            newest.append(matching[-1])  # iter_records is oldest first
    if not newest:
        names = ", ".join(report.configs) or "(none)"
        raise NoBaselineRecord(f"no baseline record for mode {report.mode}, database {db}, "
                            f"config {names} under {folder}/")
    return newest


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


# ---------------------------------------------------------------- comparing


def _series_break(run: _Side, base: _Side) -> str | None:
    if run.mode != base.mode:
        return f"another mode: baseline {base.label} is mode {base.mode}, the run is mode {run.mode}"
    if run.digests != base.digests:
        return (f"another suite digest: baseline {base.label} has {', '.join(base.digests) or 'none'}, "
                f"the run has {', '.join(run.digests) or 'none'}")
    if run.fingerprints != base.fingerprints:
        return (f"another schema fingerprint: baseline {base.label} has {', '.join(base.fingerprints) or 'none'}, "
                f"the run has {', '.join(run.fingerprints) or 'none'}")
    if run.roles != base.roles:
        return (f"other roles: baseline {base.label} ran {', '.join(base.roles) or 'none'}, "
                f"the run ran {', '.join(run.roles) or 'none'}")
    if get_mode(run.mode).uses_curated and run.curated != base.curated:
        return (f"curated answers differ: {'on' if base.curated else 'off'} in baseline {base.label}, "
                f"{'on' if run.curated else 'off'} in the run")
    return None


def _execution(record: CaseRecord) -> str | None:
    return record.execution_status  # None for routing cases: left out


def _execution_generated(record: CaseRecord) -> str | None:
    return _execution(record.generated if record.generated is not None else record)


def _status(record: CaseRecord) -> str | None:
    return record.status  # where nothing executes, a case is read by its status


#: How the gate reads a case run on each measure a mode may ask for.
VERDICTS: dict[Measure, Callable[[CaseRecord], str | None]] = {
    "execution": _execution,
    "execution_generated": _execution_generated,
    "status": _status,
}


def key_passes(results: list[CaseRecord], verdict: Callable[[CaseRecord], str | None]) -> dict[str, bool]:
    """Per case key, whether every pass passed (so a flaky case counts as failed)."""
    runs: dict[str, bool] = {}
    for record in results:
        value = verdict(record)
        if value is None or value == "skip":
            continue
        key = case_key(record)
        runs[key] = runs.get(key, True) and value == "pass"
    return runs


def _compare(config: str, measure: Measure, run: Board, base: Board) -> ConfigComparison:
    verdict = VERDICTS[measure]
    now = key_passes(run.results, verdict)
    before = key_passes(base.results, verdict)
    shared = [key for key in before if key in now]
    lost = sorted(k for k in shared if before[k] and not now[k])
    gained = sorted(k for k in shared if not before[k] and now[k])
    return ConfigComparison(
        config=config, measure=measure, lost=lost, gained=gained,
        p_value=float(stats.mcnemar_exact(len(lost), len(gained))),
        baseline_accuracy=sum(before.values()) / len(before) if before else 0.0,
        accuracy=sum(now.values()) / len(now) if now else 0.0,
        baseline_cost_per_case=base.cost.per_case_usd, cost_per_case=run.cost.per_case_usd,
    )


def _listed(keys: list[str], limit: int = 20) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def gate(report: EvalReport, baseline: EvalReport | BenchmarkRecord | str | Path,
         settings: GateSettings | None = None) -> GateResult:
    """Compare ``report`` with ``baseline``; ``ok`` only when compared and nothing regressed.
    Raises BaselineError when the baseline is missing or unreadable."""
    settings = settings or GateSettings()
    run = _from_report(report, "run")
    bases: list[_Side] = []
    for item in resolve_baseline(report, baseline):
        if isinstance(item, BenchmarkRecord):
            bases.append(_from_record(item, f"record {item.config.name} ({item.recorded_at:%Y-%m-%d})"))
        else:
            bases.append(_from_report(item, "report"))
    for base in bases:
        reason = _series_break(run, base)
        if reason is not None:
            return GateResult(ok=False, series_break=reason)
    base_boards: dict[str, Board] = {}
    for base in bases:
        for name, board in base.boards.items():
            base_boards.setdefault(name, board)
    common = [name for name in report.configs if name in base_boards]
    if not common:
        return GateResult(ok=False, series_break=(
            f"no config in common: the run has {', '.join(report.configs) or 'none'}, "
            f"the baseline has {', '.join(base_boards) or 'none'}"))

    rules = get_mode(report.mode).gate_rules(settings, report.curated)
    compared: list[ConfigComparison] = []
    regressions: list[str] = []
    for name in common:
        run_board, base_board = report.configs[name], base_boards[name]
        for measure in rules.measures:
            comparison = _compare(name, measure, run_board, base_board)
            compared.append(comparison)
            lost, gained = comparison.lost, comparison.gained
            where = f"config {name} ({measure.replace('_', ', ')})"
            if len(lost) > rules.max_lost:
                regressions.append(
                    f"{where}: {len(lost)} case(s) went from pass to fail, more than the {rules.max_lost} allowed "
                    f"in mode {report.mode}: {_listed(lost)}")
            if rules.alpha is not None and len(lost) > len(gained) and comparison.p_value < rules.alpha:
                regressions.append(
                    f"{where}: a significant drop: {len(lost)} lost, {len(gained)} gained, "
                    f"McNemar p = {comparison.p_value:.4f} < {rules.alpha}")
        base_cost, cost = base_board.cost.per_case_usd, run_board.cost.per_case_usd
        if base_cost > 0 and (cost - base_cost) / base_cost > settings.max_cost_increase + 1e-12:
            regressions.append(
                f"config {name}: cost per case rose from ${base_cost:.6f} to ${cost:.6f} "
                f"(+{(cost - base_cost) / base_cost:.1%}, more than +{settings.max_cost_increase:.0%})")
        elif base_cost == 0 and cost > 0:
            # Any cost over a free baseline is an unbounded relative rise.
            regressions.append(f"config {name}: cost per case rose from $0 to ${cost:.6f}")
    return GateResult(ok=not regressions, regressions=regressions, compared=compared)
