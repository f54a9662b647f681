"""``eval grade``: score a file of predicted SQL against a suite's gold rows, no engine involved.

Predictions come as a JSON object (case id -> SQL; for an imported benchmark the benchmark's own
question index or question_id works as the key too, and BIRD's ``\\t----- bird -----\\tdb_id``
tail is dropped) or as Spider's text format (one SQL per line in the suite's case order, an
optional tab and db id after it). Each prediction runs read-only through the datasource adapter
(its row limit and a real timeout) and is compared with ``explain_strict`` and
``explain_lenient``, the same functions a run's result_match scorer uses; the gold rows are
the suite's (a case without stored rows has its gold SQL run).
The pairs are spread over a pool of worker processes, each holding one read-only connection
per database it reads, so grading uses every core.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from nl2sql_assets.config import DatasourceConfig, NeighbourSettings, ProjectConfig
from nl2sql_assets.errors import UserError
from nl2sql_assets.evaluation.judging.comparison import comparator_settings
from nl2sql_assets.evaluation.judging.stats import Rate
from nl2sql_assets.evaluation.suites.model import EvalCase, EvalSuite
from nl2sql_assets.forking import process_pool

#: pairs per task handed to a worker: large enough that the hand-off is cheap next to the SQL
CHUNK = 64
#: below this many pairs the pool's start costs more than it saves: grade in this process
POOL_THRESHOLD = 48

_BIRD_TAIL = "\t----- bird -----\t"


class PredictionsError(UserError, ValueError):
    """A predictions file that cannot be read against the suite; names the file, the line or key."""


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    passed: bool
    reason: str
    message: str


class CaseGrade(BaseModel):
    """One prediction's verdicts; ``error_code`` when the predicted SQL did not run (or none was given)."""

    model_config = ConfigDict(extra="forbid")

    case_id: str
    datasource: str
    difficulty: str | None = None
    sql: str | None
    strict: Verdict
    lenient: Verdict
    error_code: str | None = None
    elapsed_ms: float = 0.0
    #: the reviewed answer the prediction matched: ``rows`` (the gold) or ``alt_sql[i]``
    matched: str | None = None
    #: graded on neighbours too: a strict pass on the original that holds on every kept
    #: neighbour, or ``fails_on_neighbour`` (None where the run had no neighbours)
    neighbour_robust: Verdict | None = None
    #: the evidence of an overturned pass: the neighbour's file and both results there
    overturned_on: str | None = None
    neighbour_gold_rows: list[list[Any]] | None = None
    neighbour_predicted_rows: list[list[Any]] | None = None
    #: the number of the first row of each shown (20 at most, taken where the two differ)
    neighbour_rows_from: int = 1


class DifficultyRates(BaseModel):
    model_config = ConfigDict(extra="forbid")

    strict: Rate
    lenient: Rate


class GradeReport(BaseModel):
    """Execution match of a predictions file: strict and lenient rates with their Wilson
    intervals, per difficulty (the benchmark's own label where it has one), the reasons of the
    failures, and every case's verdicts."""

    model_config = ConfigDict(extra="forbid")

    suite: str
    predictions: str
    #: predictions graded: every gradable case but those whose gold has no rows (``gold_errors``)
    graded: int
    execution: Rate
    execution_lenient: Rate
    by_difficulty: dict[str, DifficultyRates] = Field(default_factory=dict)
    reasons: dict[str, int] = Field(default_factory=dict)  # strict reason -> count, failures only
    errors: dict[str, int] = Field(default_factory=dict)  # error code -> count
    #: cases whose gold SQL failed or was cut (reason ``gold_error``): neither the prediction's
    #: failure nor its pass, so in no rate; the gold audit (``eval audit``) says why
    gold_errors: list[str] = Field(default_factory=list)
    workers: int
    seconds: float
    #: the comparator's version and rules (``comparison.comparator_settings``)
    comparator: dict[str, Any] = Field(default_factory=dict)
    #: strict on the original and on every kept neighbour (None: graded without neighbours)
    execution_neighbours: Rate | None = None
    #: each datasource's kept neighbours: how they were made and what they separate
    neighbour_sets: list[dict[str, Any]] = Field(default_factory=list)
    #: the gold audit of the graded cases (``neighbours.audit``), made with the neighbours: an
    #: overturned pass on a gold flagged here is read with its flag
    gold_audit: list[dict[str, Any]] = Field(default_factory=list)
    cases: list[CaseGrade] = Field(default_factory=list)


# ---------------------------------------------------------------- the cases and the predictions


def gradable_cases(suite: EvalSuite) -> list[EvalCase]:
    """The cases a prediction can be graded on, in suite order: answer cases with gold SQL that
    are not retired (an imported benchmark's drafts included: their rows come from its gold SQL)."""
    return [c for c in suite.cases if c.kind == "answer" and c.sql is not None and c.status != "retired"]


def read_predictions(path: str | Path, cases: Sequence[EvalCase]) -> dict[str, str]:
    """Case id -> predicted SQL, from a JSON object or Spider's one-SQL-per-line text format."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise PredictionsError(f"{path}: predictions file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PredictionsError(f"{path}: cannot read the predictions: {exc}") from None
    if text.lstrip().startswith("{"):
        return _from_json(path, text, cases)
    return _from_lines(path, text, cases)


def _from_json(path: Path, text: str, cases: Sequence[EvalCase]) -> dict[str, str]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PredictionsError(f"{path}, line {exc.lineno}, column {exc.colno}: not JSON: {exc.msg}") from None
    by_key: dict[str, str] = {c.id: c.id for c in cases}
    for case in cases:  # a benchmark's own keys: its question_id (BIRD), else its index
        if case.benchmark is not None:
            key = case.benchmark.question_id if case.benchmark.question_id is not None else case.benchmark.index
            by_key.setdefault(str(key), case.id)
    out: dict[str, str] = {}
    problems: list[str] = []
    for key, value in data.items():
        case_id = by_key.get(str(key))
        if case_id is None:
            problems.append(f"{path}: key {key!r}: no gradable case of the suite has this id")
            continue
        if not isinstance(value, str):
            problems.append(f"{path}: key {key!r}: the prediction is a string of SQL, not a {type(value).__name__}")
            continue
        out[case_id] = value.split(_BIRD_TAIL, 1)[0]
    if problems:
        raise PredictionsError("\n".join(problems[:20]) + (f"\n... and {len(problems) - 20} more" if len(problems) > 20
                                                           else ""))
    return out


def _from_lines(path: Path, text: str, cases: Sequence[EvalCase]) -> dict[str, str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != len(cases):
        raise PredictionsError(f"{path}: {len(lines)} line(s), but the suite has {len(cases)} gradable case(s): "
                               "the text format is one SQL per line, in the suite's case order")
    databases = {c.datasources[0] for c in cases}
    out: dict[str, str] = {}
    for number, (line, case) in enumerate(zip(lines, cases, strict=True), start=1):
        # The db id is what follows the last tab when it names a database of the suite: the SQL
        # itself may hold tabs (``SELECT code\tFROM country``).
        sql, _, tail = line.rstrip("\r").rpartition("\t")
        db_id = tail.strip()
        if not sql or db_id not in databases:
            sql, db_id = line.rstrip("\r"), ""
        if db_id and db_id != case.datasources[0]:
            raise PredictionsError(f"{path}, line {number}: db id {db_id!r}, but case {case.id} (line {number} "
                                   f"in case order) reads {case.datasources[0]!r}")
        out[case.id] = sql
    return out


# ---------------------------------------------------------------- the workers

@dataclass(frozen=True)
class GoldSide:
    """What a prediction is graded against: the case's datasource, its accepted answers (the gold
    first, then each reviewed alternative: label, stored rows or None, and the SQL that makes them
    when none are stored) and whether row order counts."""

    datasource: str
    answers: tuple[tuple[str, list[list[Any]] | None, str], ...]
    order_matters: bool

    @classmethod
    def of(cls, case: EvalCase) -> GoldSide:
        from nl2sql_assets.evaluation.judging.answers import GOLD_LABEL, alternative_label

        stored = [list(r.values()) for r in case.rows] if case.rows is not None else None
        answers = [(GOLD_LABEL, stored, case.sql or "")]
        for i, sql in enumerate(case.alt_sql, start=1):
            alt = case.alt_rows[i - 1] if i <= len(case.alt_rows) else None
            answers.append((alternative_label(i), [list(r.values()) for r in alt] if alt is not None else None, sql))
        return cls(case.datasources[0], tuple(answers), case.order_matters)


# One worker's state: the gold side of every case, the datasource configs, its open adapters.
_GOLD: list[GoldSide] = []
_CONFIGS: dict[str, DatasourceConfig] = {}
_ADAPTERS: dict[str, Any] = {}
_LIVE_GOLD: dict[int, list[tuple[str, list[list[Any]]]] | str] = {}

Task = tuple[int, str | None]  # (case index, predicted SQL)
Outcome = tuple[int, bool, str, str, bool, str, str, str | None, float, str | None]


def _init_worker(gold: list[GoldSide], configs: dict[str, DatasourceConfig]) -> None:
    global _GOLD, _CONFIGS, _ADAPTERS, _LIVE_GOLD
    _GOLD, _CONFIGS, _ADAPTERS, _LIVE_GOLD = gold, configs, {}, {}


def _adapter(datasource: str) -> Any:
    adapter = _ADAPTERS.get(datasource)
    if adapter is None:
        from nl2sql_assets.datasources.registry import open_adapter

        # one connection for all of this worker's pairs, each statement checked by the engine's own rules
        adapter = open_adapter(_CONFIGS[datasource], bulk=True)
        _ADAPTERS[datasource] = adapter
    return adapter


def _answers(index: int) -> list[tuple[str, list[list[Any]]]] | str:
    """The case's accepted answers (label, rows): stored, or their SQL run once in this worker; a
    str says why the gold has none. An alternative whose SQL fails here is left out."""
    side = _GOLD[index]
    if all(rows is not None for _, rows, _ in side.answers):
        return [(label, rows) for label, rows, _ in side.answers]  # type: ignore[misc]
    if index not in _LIVE_GOLD:
        from nl2sql_assets.datasources.base import DatasourceError

        out: list[tuple[str, list[list[Any]]]] = []
        for position, (label, rows, sql) in enumerate(side.answers):
            if rows is None:
                try:
                    result = _adapter(side.datasource).execute(sql)
                except DatasourceError as exc:
                    if position == 0:
                        out = []
                        _LIVE_GOLD[index] = f"the gold SQL failed: {exc}"
                        break
                    continue
                if result.truncated:
                    if position == 0:
                        _LIVE_GOLD[index] = "the gold result was cut at the row limit"
                        break
                    continue
                rows = result.rows
            out.append((label, rows))
        else:
            _LIVE_GOLD[index] = out
    return _LIVE_GOLD[index]


def _grade(task: Task) -> Outcome:
    from nl2sql_assets.datasources.base import DatasourceError
    from nl2sql_assets.evaluation.judging.answers import match_answers

    index, sql = task
    started = time.perf_counter()
    if sql is None or not sql.strip():
        message = "no prediction for this case" if sql is None else "the prediction is empty"
        return (index, False, "no_prediction", message, False, "no_prediction", message, "NO_PREDICTION", 0.0,
                None)
    answers = _answers(index)
    if isinstance(answers, str):
        return (index, False, GOLD_ERROR, answers, False, GOLD_ERROR, answers, "GOLD_ERROR", 0.0, None)
    try:
        out = _adapter(_GOLD[index].datasource).execute(sql)
    except DatasourceError as exc:
        elapsed = (time.perf_counter() - started) * 1000.0
        message = str(exc)
        return (index, False, "execution_error", message, False, "execution_error", message, exc.code, elapsed,
                None)
    verdict = match_answers(answers, out.rows, _GOLD[index].order_matters)
    strict, lenient = verdict.strict, verdict.lenient
    elapsed = (time.perf_counter() - started) * 1000.0
    code = "ROW_LIMIT" if out.truncated and not strict.passed else None
    return (index, strict.passed, strict.reason, strict.message, lenient.passed, lenient.reason, lenient.message,
            code, elapsed, verdict.matched or verdict.lenient_matched)


def _grade_chunk(tasks: list[Task]) -> list[Outcome]:
    return [_grade(task) for task in tasks]


def _close_adapters() -> None:
    for adapter in _ADAPTERS.values():
        adapter.close()
    _ADAPTERS.clear()


# ---------------------------------------------------------------- grading


def _chunks(tasks: list[Task], size: int) -> Iterator[list[Task]]:
    for start in range(0, len(tasks), size):
        yield tasks[start:start + size]


def grade(suite: EvalSuite, predictions: dict[str, str], configs: dict[str, DatasourceConfig], *,
          workers: int | None = None, predictions_name: str = "", cases: Sequence[EvalCase] | None = None
          ) -> GradeReport:
    """Grade every gradable case of ``suite`` (``cases``: a subset) against its prediction; a case
    without one fails with ``no_prediction``. ``workers`` defaults to the machine's cores."""
    started = time.perf_counter()
    cases = list(cases) if cases is not None else gradable_cases(suite)
    missing = sorted({c.datasources[0] for c in cases} - set(configs))
    if missing:
        raise UserError(f"the suite's cases read datasource(s) {missing} that the project does not configure")
    gold = [GoldSide.of(c) for c in cases]
    # Cases of one database next to each other: a chunk then touches few connections.
    tasks: list[Task] = sorted(((i, predictions.get(c.id)) for i, c in enumerate(cases)),
                               key=lambda t: (gold[t[0]].datasource, t[0]))
    workers = max(1, workers if workers is not None else (os.cpu_count() or 1))
    outcomes: list[Outcome] = []
    if workers == 1 or len(tasks) < POOL_THRESHOLD:
        _init_worker(gold, configs)
        try:
            outcomes = _grade_chunk(tasks)
        finally:
            _close_adapters()
        workers = 1
    else:
        size = max(1, min(CHUNK, len(tasks) // (workers * 4) or 1))
        with process_pool(workers, initializer=_init_worker, initargs=(gold, configs)) as pool:
            for part in pool.map(_grade_chunk, _chunks(tasks, size)):
                outcomes.extend(part)
    outcomes.sort(key=lambda o: o[0])
    grades = [
        CaseGrade(case_id=cases[i].id, datasource=cases[i].datasources[0], difficulty=cases[i].difficulty_label,
                  sql=predictions.get(cases[i].id), strict=Verdict(passed=sp, reason=sr, message=sm),
                  lenient=Verdict(passed=lp, reason=lr, message=lm), error_code=code, elapsed_ms=round(ms, 3),
                  matched=matched)
        for i, sp, sr, sm, lp, lr, lm, code, ms, matched in outcomes
    ]
    return _report(suite, predictions_name, grades, workers, time.perf_counter() - started)


GOLD_ERROR = "gold_error"


def is_graded(g: CaseGrade) -> bool:
    """Whether a case counts in the rates: not when its own gold could not be run."""
    return g.strict.reason != GOLD_ERROR


def _report(suite: EvalSuite, name: str, grades: list[CaseGrade], workers: int, seconds: float) -> GradeReport:
    scored = [g for g in grades if is_graded(g)]
    strict = sum(g.strict.passed for g in scored)
    lenient = sum(g.lenient.passed for g in scored)
    by: dict[str, list[CaseGrade]] = {}
    for g in scored:
        by.setdefault(g.difficulty or "unlabelled", []).append(g)
    return GradeReport(
        suite=suite.name or "suite", predictions=name, graded=len(scored),
        gold_errors=[g.case_id for g in grades if not is_graded(g)],
        execution=Rate.of(strict, len(scored)), execution_lenient=Rate.of(lenient, len(scored)),
        by_difficulty={label: DifficultyRates(strict=Rate.of(sum(g.strict.passed for g in gs), len(gs)),
                                              lenient=Rate.of(sum(g.lenient.passed for g in gs), len(gs)))
                       for label, gs in sorted(by.items())},
        reasons=dict(Counter(g.strict.reason for g in scored if not g.strict.passed).most_common()),
        errors=dict(Counter(g.error_code for g in scored if g.error_code).most_common()),
        workers=workers, seconds=round(seconds, 3), comparator=comparator_settings(), cases=grades,
    )


# ---------------------------------------------------------------- on neighbour databases



def grade_on_neighbours(report: GradeReport, suite: EvalSuite, cases: Sequence[EvalCase],
                        config: ProjectConfig, settings: NeighbourSettings | None = None, *,
                        suite_name: str | None = None) -> GradeReport:
    """``report`` with each strict pass graded on its datasource's kept neighbours too (built
    under the project's warehouse once, then read back): the neighbour-robust rate beside the
    original's, and the evidence of every pass a neighbour overturns."""
    from nl2sql_assets.evaluation.neighbours.store import project_sets, project_suites
    from nl2sql_assets.paths import neighbours_dir

    settings = settings or NeighbourSettings()
    name = suite_name or suite.name or "suite"
    sets = project_sets(config, project_suites(config, [(name, suite)]), settings, neighbours_dir(config.root),
                        datasources={c.datasources[0] for c in cases})
    by_id = {c.id: c for c in cases}
    graded: list[CaseGrade] = []
    judges = {datasource: kept.judge() for datasource, kept in sets.items()}
    try:
        for g in report.cases:
            kept = sets.get(g.datasource)
            graded.append(_on_neighbours(g, by_id[g.case_id], name, kept.paths if kept else None,
                                         judges.get(g.datasource)))
    finally:
        for judge in judges.values():
            judge.close()
    graded = _on_witnesses(graded, by_id, name, sets, settings.witness)
    robust = sum(1 for g in graded if is_graded(g) and g.neighbour_robust is not None and g.neighbour_robust.passed)
    from nl2sql_assets.evaluation.neighbours.audit import audit_suite

    ids = {c.id for c in cases}
    audit = [f.model_dump() for f in audit_suite(config, name, suite, settings, sets=sets).flags if f.case in ids]
    return report.model_copy(update={
        "cases": graded, "execution_neighbours": Rate.of(robust, sum(1 for g in graded if is_graded(g))),
        "neighbour_sets": [{**kept.manifest.model_dump(), "folder": str(kept.home)} for kept in sets.values()],
        "gold_audit": audit,
    })


def _on_witnesses(graded: list[CaseGrade], by_id: dict[str, EvalCase], suite_name: str, sets: dict[str, Any],
                  candidates: int) -> list[CaseGrade]:
    """Every pass that held on the kept neighbours searched for a witness (on every core): a
    witness found overturns it, the database kept beside the set as evidence."""
    from nl2sql_assets.evaluation.neighbours import FAILS_ON_WITNESS, gold_query
    from nl2sql_assets.evaluation.neighbours.witness import search_all

    searches = {ds: kept.witness_search(candidates) for ds, kept in sets.items()}
    held = [i for i, g in enumerate(graded) if g.sql and g.neighbour_robust is not None and g.neighbour_robust.passed
            and searches.get(g.datasource) is not None]
    outcomes = search_all([(searches[graded[i].datasource], gold_query(by_id[graded[i].case_id], suite_name),
                            graded[i].sql or "") for i in held])
    out = list(graded)
    for i, outcome in zip(held, outcomes, strict=True):
        record = outcome.record
        if record is None or not record.found:
            continue
        what = ", ".join(record.kinds)
        where = str(outcome.path) if outcome.path else "a witness database"
        out[i] = out[i].model_copy(update={
            "neighbour_robust": Verdict(passed=False, reason=FAILS_ON_WITNESS, message=(
                f"passes on the original and every kept neighbour, fails on a witness database the search built "
                f"for where it differs from the gold ({what}): {Path(where).name}")),
            "overturned_on": where,
            "neighbour_gold_rows": record.gold_rows or [], "neighbour_predicted_rows": record.predicted_rows,
            "neighbour_rows_from": record.rows_from,
        })
    return out


def _on_neighbours(g: CaseGrade, case: EvalCase, suite_name: str, kept: list[Path] | None, judge: Any) -> CaseGrade:
    """One case's grade with its neighbour-robust verdict (and the evidence of an overturn)."""
    from nl2sql_assets.evaluation.neighbours import FAILS_ON_NEIGHBOUR, gold_query

    if not g.strict.passed:
        return g.model_copy(update={"neighbour_robust": g.strict})
    if not kept or not g.sql:
        return g.model_copy(update={"neighbour_robust": Verdict(passed=True, reason="match",
                                                                message="no neighbours kept for its datasource")})
    outcome = judge.overturn(gold_query(case, suite_name), g.sql, search=False)  # the search: ``_on_witnesses``
    if outcome.passed:
        return g.model_copy(update={"neighbour_robust": Verdict(
            passed=True, reason="match", message=f"matches on the original and {len(kept)} neighbour(s)")})
    where = kept[outcome.neighbour or 0]
    return g.model_copy(update={
        "neighbour_robust": Verdict(passed=False, reason=FAILS_ON_NEIGHBOUR,
                                    message=f"passes on the original, fails on neighbour {where.name}"),
        "overturned_on": str(where),
        "neighbour_gold_rows": outcome.gold_rows or [], "neighbour_predicted_rows": outcome.predicted_rows,
        "neighbour_rows_from": outcome.rows_from,
    })
