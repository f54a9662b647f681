"""The regression gate's comparison: a run against a baseline case by case, not headline to headline.

Only comparable runs are compared (same mode, suite digests, schema fingerprints, roles and, in
mode full, curated answers). Per config both runs have, it counts the cases that flipped each
way on execution accuracy, tests the flips with McNemar's exact test and checks cost per case.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import Field

from nl2sql_assets.config import GateSettings, StrictModel
from nl2sql_assets.evaluation.judging import stats
from nl2sql_assets.evaluation.reporting.board import Board, EvalReport
from nl2sql_assets.evaluation.reporting.tally import case_key, is_query
from nl2sql_assets.evaluation.running.modes import Measure, get_mode
from nl2sql_assets.evaluation.running.results import CaseRecord


class ConfigComparison(StrictModel):
    """One config and measure. Case keys are ``case_id@role``; a key passed only when every
    pass passed. Accuracies here are over case keys, not runs."""

    config: str
    measure: Measure
    lost: list[str] = Field(default_factory=list)  # passed in the baseline, fail now
    gained: list[str] = Field(default_factory=list)  # failed in the baseline, pass now
    p_value: float = 1.0
    baseline_accuracy: float = 0.0
    accuracy: float = 0.0
    baseline_cost_per_case: float = 0.0
    cost_per_case: float = 0.0
    #: read on the neighbours too (the gate's ``verdict: neighbours``): a pass overturned there failed
    on_neighbours: bool = False


class GateResult(StrictModel):
    ok: bool
    regressions: list[str] = Field(default_factory=list)
    series_break: str | None = None
    compared: list[ConfigComparison] = Field(default_factory=list)
    #: what the gate did not compare and why (cost per case across unlike token counts)
    notes: list[str] = Field(default_factory=list)


@dataclass
class Baseline:
    """One side of a comparison: the series identity (mode, suite digests, schema fingerprints,
    roles, curated answers) and the boards by config. A report gives one (``of_report``), and
    so does a benchmark record (``history.baselines``)."""

    label: str
    mode: str
    digests: tuple[str, ...]
    fingerprints: tuple[str, ...]
    roles: tuple[str, ...]
    curated: bool
    boards: dict[str, Board] = field(default_factory=dict)
    incomplete: bool = False  # some case runs failed for the environment (an outage)
    #: suite digest -> suite name: which case records belong to which suite (``narrowed_to``)
    suites: dict[str, str] = field(default_factory=dict)
    #: the neighbour settings the passes were also graded on (``NeighbourRun.series``; None: none)
    neighbours: tuple[Any, ...] | None = None
    #: the versions of what judged the case runs: the comparator's and the final-SQL policy check's
    comparator_version: int = 1
    policy_check_version: int = 1

    @classmethod
    def of_report(cls, report: EvalReport, label: str = "report") -> Baseline:
        return cls(label=label, mode=report.mode, digests=tuple(sorted(s.digest for s in report.suites)),
                   fingerprints=tuple(sorted(d.schema_fingerprint for d in report.databases)),
                   roles=tuple(sorted(report.roles)), curated=report.curated, boards=dict(report.configs),
                   incomplete=report.incomplete, suites={s.digest: s.name for s in report.suites},
                   neighbours=report.neighbours.series() if report.neighbours is not None else None,
                   comparator_version=report.comparator_version, policy_check_version=report.policy_check_version)

    def narrowed_to(self, run: Baseline) -> Baseline | None:
        """This baseline cut down to the suites of a run that asked fewer of them (one suite's
        board against a record of every suite): only the case records of the run's suites, their
        cost per case recounted. None unless each of the run's suites (by digest) and schemas (by
        fingerprint) is in this baseline and the run has fewer suites."""
        digests, fingerprints = set(run.digests), set(run.fingerprints)
        if not digests < set(self.digests) or not fingerprints <= set(self.fingerprints):
            return None
        names = {self.suites[d] for d in digests if d in self.suites}
        if len(names) != len(digests):
            return None  # a baseline that does not name its suites cannot be cut by suite
        boards = {name: narrowed_board(board, names) for name, board in self.boards.items()}
        return replace(self, label=f"{self.label}, its suite(s) {', '.join(sorted(names))}",
                       digests=run.digests, fingerprints=run.fingerprints,
                       suites={d: self.suites[d] for d in digests}, boards=boards,
                       # the roles those suites' cases were asked as (as a run's roles are the roles it asked)
                       roles=tuple(sorted({r.role for board in boards.values() for r in board.results})))


def narrowed_board(board: Board, suites: set[str]) -> Board:
    """``board`` with only the case records of ``suites``; cost per case over those records (as
    the tally counts it: every query run, the curated-off reruns' dollars included)."""
    kept = [r for r in board.results if r.suite in suites]
    scored = [r for r in kept if r.env_error is None and r.status != "skip"]
    queries = [r for r in scored if is_query(r)]
    total = sum((r.cost_usd or 0.0) + (r.generated.cost_usd or 0.0 if r.generated is not None else 0.0)
                for r in scored)
    cost = board.cost.model_copy(update={"total_usd": total,
                                         "per_case_usd": total / len(queries) if queries else 0.0})
    return board.model_copy(update={"results": kept, "cost": cost})


# ---------------------------------------------------------------- comparing


def _incomplete(side: Baseline, env_errors: dict[str, int] | None = None) -> str | None:
    if not side.incomplete:
        return None
    kinds = f" ({', '.join(f'{n} {k}' for k, n in sorted(env_errors.items()))})" if env_errors else ""
    return (f"{'the run' if side.label == 'run' else f'baseline {side.label}'} is incomplete: some case runs "
            f"failed for the environment{kinds}, not the model; an outage is never read as a regression")


def _series_break(run: Baseline, base: Baseline) -> str | None:
    if (reason := _incomplete(base)) is not None:
        return reason
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
    if get_mode(run.mode).executes:
        for what, theirs, ours in (("comparator", base.comparator_version, run.comparator_version),
                                   ("final-SQL policy check", base.policy_check_version, run.policy_check_version)):
            if theirs != ours:
                return (f"another {what} version: baseline {base.label} was judged by {what} version {theirs}, "
                        f"the run by version {ours}; its verdicts may differ by the rules alone. Re-record the "
                        f"baseline: run the same evaluation with this version and `nl2sql-assets eval publish` "
                        f"its report")
    if get_mode(run.mode).uses_curated and run.curated != base.curated:
        return (f"curated answers differ: {'on' if base.curated else 'off'} in baseline {base.label}, "
                f"{'on' if run.curated else 'off'} in the run")
    for index, what in ((4, "neighbour generator"), (6, "witness search")):
        if (run.neighbours is not None and base.neighbours is not None
                and _without(run.neighbours, index) == _without(base.neighbours, index)
                and _at(run.neighbours, index) != _at(base.neighbours, index)):
            return (f"another {what} version: baseline {base.label} was graded under {what} version "
                    f"{_at(base.neighbours, index)}, the run under version {_at(run.neighbours, index)}. Re-record "
                    "the baseline: run the same evaluation with this version and `nl2sql-assets eval publish` its "
                    "report")
    if run.neighbours != base.neighbours:
        return (f"other neighbour databases: baseline {base.label} was graded on {_neighbours(base.neighbours)}, "
                f"the run on {_neighbours(run.neighbours)}")
    return None


def _at(series: tuple[Any, ...], index: int) -> Any:
    return series[index] if index < len(series) else None


def _without(series: tuple[Any, ...], index: int) -> tuple[Any, ...]:
    return series[:index] + series[index + 1:]


def _neighbours(series: tuple[Any, ...] | None) -> str:
    """A neighbour series (``NeighbourRun.series``) in words."""
    if series is None:
        return "none"
    count, seed, candidates, max_rows, generator = series[:5]
    witness = _at(series, 5) or 0
    search = f", witness search {witness} candidates a pass" if witness else ", no witness search"
    return (f"K {count}, seed {seed} ({candidates} candidates, {max_rows} rows a table, generator "
            f"version {generator}{search})")


def _execution(record: CaseRecord) -> str | None:
    if record.kind == "probe":  # a policy probe executes nothing: its verdict is the policy's decision
        return record.status
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


def on_neighbours(verdict: Callable[[CaseRecord], str | None]) -> Callable[[CaseRecord], str | None]:
    """``verdict`` read on the neighbours too: a pass that a kept neighbour overturned fails."""
    from nl2sql_assets.evaluation.running.scorers import NEIGHBOUR_SCORER

    def read(record: CaseRecord) -> str | None:
        value = verdict(record)
        score = record.scores.get(NEIGHBOUR_SCORER)
        return "fail" if value == "pass" and score is not None and score.passed is False else value

    return read


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


def _compare(config: str, measure: Measure, run: Board, base: Board, neighbours: bool = False) -> ConfigComparison:
    verdict = on_neighbours(VERDICTS[measure]) if neighbours else VERDICTS[measure]
    now = key_passes(run.results, verdict)
    before = key_passes(base.results, verdict)
    shared = [key for key in before if key in now]
    lost = sorted(k for k in shared if before[k] and not now[k])
    gained = sorted(k for k in shared if not before[k] and now[k])
    return ConfigComparison(
        config=config, measure=measure, lost=lost, gained=gained, on_neighbours=neighbours,
        p_value=float(stats.mcnemar_exact(len(lost), len(gained))),
        baseline_accuracy=sum(before.values()) / len(before) if before else 0.0,
        accuracy=sum(now.values()) / len(now) if now else 0.0,
        baseline_cost_per_case=base.cost.per_case_usd, cost_per_case=run.cost.per_case_usd,
    )


def _measured(board: Board) -> bool:
    return board.cost.token_source in (None, "measured")


def cost_not_comparable(base: Board, run: Board) -> str | None:
    """Why the two boards' cost per case cannot be compared (None: it can). Both must count
    tokens alike (both as the provider reported them, or both flagged as estimated), and the
    baseline must have a known, non-zero cost: a rise over nothing or over a lower bound is not one."""
    if base.cost.unknown_cost_calls or run.cost.unknown_cost_calls:
        side = "the baseline" if base.cost.unknown_cost_calls else "the run"
        return f"{side} has calls that could not be priced (its cost is a lower bound)"
    if base.cost.per_case_usd <= 0:
        return "the baseline's cost is zero (nothing to compare a rise with)"
    if _measured(base) != _measured(run):
        return (f"token counts differ in kind: the baseline's are {base.cost.token_source or 'measured'}, "
                f"the run's {run.cost.token_source or 'measured'}")
    return None


def _listed(keys: list[str], limit: int = 20) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def compare(report: EvalReport, baselines: Sequence[Baseline | EvalReport],
            settings: GateSettings | None = None) -> GateResult:
    """Compare ``report`` with its baselines (a report, or one record per config); ``ok`` only
    when compared and nothing regressed. What is compared, and how strictly, is the mode's
    (``Mode.gate_rules``). Finding a baseline on disk is ``history.baselines.gate``."""
    settings = settings or GateSettings()
    run = Baseline.of_report(report, "run")
    bases = [b if isinstance(b, Baseline) else Baseline.of_report(b) for b in baselines]
    if (reason := _incomplete(run, report.env_errors)) is not None:
        return GateResult(ok=False, series_break=reason)
    notes: list[str] = []
    for i, base in enumerate(bases):
        narrowed = base.narrowed_to(run)
        if narrowed is not None:
            bases[i] = base = narrowed
            notes.append(f"compared with {base.label}")
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
    neighbours = settings.verdict == "neighbours" and run.neighbours is not None
    if settings.verdict == "neighbours" and not neighbours:
        notes.append("the gate reads verdicts on the neighbours, but the run was not graded on any: "
                     "gated on the original database")
    for name in common:
        run_board, base_board = report.configs[name], base_boards[name]
        for measure in rules.measures:
            comparison = _compare(name, measure, run_board, base_board, neighbours)
            compared.append(comparison)
            lost, gained = comparison.lost, comparison.gained
            where = f"config {name} ({measure.replace('_', ', ')}{' on neighbours' if neighbours else ''})"
            if len(lost) > rules.max_lost:
                regressions.append(
                    f"{where}: {len(lost)} case(s) went from pass to fail, more than the {rules.max_lost} allowed "
                    f"in mode {report.mode}: {_listed(lost)}")
            if rules.alpha is not None and len(lost) > len(gained) and comparison.p_value < rules.alpha:
                regressions.append(
                    f"{where}: a significant drop: {len(lost)} lost, {len(gained)} gained, "
                    f"McNemar p = {comparison.p_value:.4f} < {rules.alpha}")
        why_not = cost_not_comparable(base_board, run_board)
        if why_not is not None:
            notes.append(f"config {name}: cost per case not compared: {why_not}")
            continue
        base_cost, cost = base_board.cost.per_case_usd, run_board.cost.per_case_usd
        if (cost - base_cost) / base_cost > settings.max_cost_increase + 1e-12:
            regressions.append(
                f"config {name}: cost per case rose from ${base_cost:.6f} to ${cost:.6f} "
                f"(+{(cost - base_cost) / base_cost:.1%}, more than +{settings.max_cost_increase:.0%})")
    return GateResult(ok=not regressions, regressions=regressions, compared=compared, notes=notes)
