"""The eval report: one board per config, built from the case records a run produced.

A board turns case records into the numbers people read (accuracies with Wilson intervals,
pass^k, cost, latency, scorer tallies) while keeping the records themselves, so the gate and
the benchmark records can always go back to the case level instead of trusting a headline.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nl2sql_assets.atomic import atomic_write
from nl2sql_assets.engine.result import QUESTION_NOT_ANSWERABLE, Usage
from nl2sql_assets.errors import validation_summary
from nl2sql_assets.evaluation import stats
from nl2sql_assets.evaluation.case_record import CaseRecord, Verdict
from nl2sql_assets.redact import redact

Mode = Literal["full", "plans", "retrieval"]
VERDICTS: tuple[str, ...] = ("pass", "fail", "error", "skip")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ---------------------------------------------------------------- what the runner fills in


class SuiteRef(_Model):
    name: str
    path: str
    digest: str  # SHA-256 of the suite file's LF bytes


class DatabaseRef(_Model):
    datasource_id: str
    engine: str
    schema_fingerprint: str
    tables: int = 0
    columns: int = 0


class ConfigMeta(_Model):
    models: dict[str, str] = Field(default_factory=dict)  # node -> provider/model
    planned_cases: int = 0
    completed_cases: int = 0
    unknown_cost_calls: int = 0


class RunStamp(_Model):
    """When a run happened and on which code; records copy it, never the clock at publish time."""

    started_at: datetime
    finished_at: datetime
    package_version: str
    git_commit: str = "unknown"
    git_dirty: bool | Literal["unknown"] = "unknown"


def _one_database_as_list(data: Any) -> Any:
    """Accept ``database=`` (one ref or a list) as a spelling of ``databases=``."""
    if isinstance(data, dict) and "database" in data:
        data = dict(data)
        value = data.pop("database")
        if "databases" in data:
            raise ValueError("database: give either database or databases, not both")
        data["databases"] = [] if value is None else value if isinstance(value, list) else [value]
    return data


class RunFacts(_Model):
    """What a run was, apart from its boards: shared by RunMeta (the runner's input to a
    report) and EvalReport (the report itself), so the two cannot drift apart."""

    mode: Mode
    suites: list[SuiteRef] = Field(default_factory=list)
    roles: list[str] = Field(default_factory=list)
    passes: int = Field(default=1, ge=1)
    curated: bool = False
    clarify: bool = False
    max_cost_usd: float | None = None
    spent: float = 0.0
    stopped: Literal["max_cost"] | None = None
    skipped: int = 0
    settings: dict[str, Any] = Field(default_factory=dict)
    databases: list[DatabaseRef] = Field(default_factory=list)
    scorers: list[str] = Field(default_factory=list)
    run_stamp: RunStamp
    comparator_version: int = 1

    @model_validator(mode="before")
    @classmethod
    def _accept_database(cls, data: Any) -> Any:
        return _one_database_as_list(data)

    @property
    def database(self) -> DatabaseRef | None:
        return self.databases[0] if self.databases else None


class RunMeta(RunFacts):
    """Everything about a run that is not a case record; the runner builds it."""

    configs: dict[str, ConfigMeta] = Field(default_factory=dict)  # in the order to report them


# ---------------------------------------------------------------- the board


class Rate(_Model):
    """A share with its 95% Wilson interval (``low``/``high``; 0..1 when nothing was counted)."""

    passed: int
    total: int
    rate: float
    low: float
    high: float

    @classmethod
    def of(cls, passed: int, total: int) -> Rate:
        if total <= 0:
            return cls(passed=0, total=0, rate=0.0, low=0.0, high=1.0)
        low, high = stats.wilson_interval(passed, total)
        return cls(passed=passed, total=total, rate=passed / total, low=float(low), high=float(high))


class PassK(_Model):
    """Cases that passed in every one of ``k`` passes (a case with fewer runs than k is left out)."""

    k: int
    overall: Rate
    lenient: Rate
    execution: Rate


class Accuracy(_Model):
    overall: Rate  # every applicable scorer passed: what users see
    lenient: Rate  # as overall, result_match read leniently
    generated: Rate  # the generated path: the curated-off rerun where there is one
    execution: Rate  # result_match and outcome only; routing cases left out
    execution_lenient: Rate  # execution with result_match read leniently (the records' second headline)
    pass_k: PassK
    by_tag: dict[str, Rate] = Field(default_factory=dict)
    by_difficulty: dict[str, Rate] = Field(default_factory=dict)
    by_source: dict[str, Rate] = Field(default_factory=dict)
    generated_by_source: dict[str, Rate] = Field(default_factory=dict)


class Summary(_Model):
    """Verdict counts (keys pass, fail, error, skip) per role and over all roles."""

    roles: dict[str, dict[str, int]] = Field(default_factory=dict)
    total: dict[str, int] = Field(default_factory=lambda: dict.fromkeys(VERDICTS, 0))


class ScorerSummary(_Model):
    applied: int = 0
    passed: int = 0
    failed: int = 0
    errored: int = 0
    mean: float | None = None  # mean value over the runs it gave a value


class RetrievalSummary(_Model):
    cases: int
    table_recall: float
    column_recall: float
    perfect_tables: int
    perfect_columns: int
    tables_sent: float
    columns_sent: float


class RoutingSummary(_Model):
    """Mode retrieval's routing verdicts: top-1 hits and full shortlists."""

    cases: int
    top1: Rate
    shortlist: Rate


class Answerability(_Model):
    correctly_declined: Rate  # over runs expected unanswerable
    wrongly_declined: Rate  # over runs expected to be answered


class Unfaithful(_Model):
    case: str
    role: str
    pass_index: int = 1
    unsupported_numbers: list[Any] = Field(default_factory=list)
    unsupported_entities: list[Any] = Field(default_factory=list)


class Faithfulness(_Model):
    answers: int  # answers written and checked
    faithful: int
    rate: float
    unfaithful: list[Unfaithful] = Field(default_factory=list)


class Cost(_Model):
    total_usd: float = 0.0  # a lower bound when unknown_cost_calls > 0
    per_case_usd: float = 0.0
    unknown_cost_calls: int = 0


class Latency(_Model):
    mean: float = 0.0
    p50: float = 0.0
    p95: float = 0.0


class Retries(_Model):
    total: int = 0
    cases_with_retries: int = 0


class Determinism(_Model):
    deterministic_cases: int
    total_cases: int
    rate: float
    nondeterministic: list[str] = Field(default_factory=list)


class Board(_Model):
    """One config's results. Intervals are taken over the runs scored; with several passes
    the runs of one case are not independent, so they read narrower than they are (pass^k
    counts cases and does not have that problem)."""

    config: str
    accuracy: Accuracy
    summary: Summary
    scores: dict[str, ScorerSummary] = Field(default_factory=dict)
    retrieval: RetrievalSummary | None = None
    routing: RoutingSummary | None = None
    answerability: Answerability | None = None
    faithfulness: Faithfulness | None = None
    tokens_by_node: dict[str, Usage] = Field(default_factory=dict)
    cost: Cost = Field(default_factory=Cost)
    latency: Latency = Field(default_factory=Latency)
    retries: Retries = Field(default_factory=Retries)
    errors_by_code: dict[str, int] = Field(default_factory=dict)
    determinism: Determinism | None = None
    models: dict[str, str] = Field(default_factory=dict)
    planned_cases: int = 0
    completed_cases: int = 0
    results: list[CaseRecord] = Field(default_factory=list)


# ---------------------------------------------------------------- several configs side by side


class ConfigHeadline(_Model):
    overall: Rate
    lenient: Rate
    execution: Rate
    generated: Rate
    pass_k: Rate
    cost_per_case_usd: float


class CaseDifferences(_Model):
    """Cases (``case_id@role``, passed = every pass passed) that differ from the first config."""

    config: str
    reference: str
    measure: Literal["overall"] = "overall"
    passes_only_here: list[str] = Field(default_factory=list)
    passes_only_in_reference: list[str] = Field(default_factory=list)
    p_value: float = 1.0  # McNemar exact, two-sided, on those flips


class Comparison(_Model):
    reference: str
    headlines: dict[str, ConfigHeadline]
    differences: list[CaseDifferences] = Field(default_factory=list)


# ---------------------------------------------------------------- the report


class EvalReport(RunFacts):
    """A run's boards, one per config, and their comparison when there are several."""

    configs: dict[str, Board] = Field(default_factory=dict)
    comparison: Comparison | None = None

    @property
    def first_board(self) -> Board | None:
        return next(iter(self.configs.values()), None)

    @property
    def accuracy(self) -> float:
        """What users see, on the first config's board."""
        board = self.first_board
        return board.accuracy.overall.rate if board else 0.0

    @property
    def accuracy_generated(self) -> float:
        """The generated path on the first config's board: the model's own skill."""
        board = self.first_board
        return board.accuracy.generated.rate if board else 0.0

    def save(self, path: str | Path) -> Path:
        return save_report(self, path)

    @classmethod
    def load(cls, path: str | Path) -> EvalReport:
        return load_report(path)


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write through a temporary file and rename, so a reader never sees half a file."""
    return atomic_write(path, text)


def save_report(report: EvalReport, path: str | Path) -> Path:
    return atomic_write_text(path, redact(report.model_dump_json(indent=2)) + "\n")


def load_report(path: str | Path) -> EvalReport:
    """Read a report JSON; a bad file raises ValueError naming it."""
    path = Path(path)
    try:
        return EvalReport.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the report: {exc}") from exc
    except ValueError as exc:
        raise ValueError(f"{path}: not an eval report: {validation_summary(exc)}") from exc


# ---------------------------------------------------------------- building boards


def case_key(record: CaseRecord) -> str:
    """A case run's identity across passes and across runs."""
    return f"{record.case_id}@{record.role}"


def _passed(verdict: str | None) -> bool:
    return verdict == "pass"


def generated_status(record: CaseRecord) -> Verdict:
    """The generated path: the curated-off rerun when the answer came from a verified query."""
    return record.generated.status if record.generated is not None else record.status


def lenient_status(record: CaseRecord) -> Verdict:
    return record.lenient_status if record.lenient_status is not None else record.status


def _lenient_flag(detail: dict[str, Any]) -> bool | None:
    value = detail.get("lenient")
    if isinstance(value, bool):
        return value
    if isinstance(value, dict):
        passed = value.get("passed")
        return passed if isinstance(passed, bool) else None
    return None


def execution_lenient_status(record: CaseRecord) -> Verdict | None:
    """Execution accuracy with result_match read leniently: a strict pass stays a pass, and a
    strict miss passes when result_match's lenient reading passed and no other execution
    scorer (outcome) failed."""
    strict = record.execution_status
    if strict is None or strict in ("pass", "error", "skip"):
        return strict
    match = record.scores.get("result_match")
    if match is None or not _lenient_flag(match.detail):
        return strict
    outcome = record.scores.get("outcome")
    if outcome is not None and outcome.applies and outcome.passed is not True:
        return strict
    return "pass"


def _all_pass_by_key(records: Iterable[CaseRecord], verdict: Callable[[CaseRecord], str | None]) -> dict[str, list[bool]]:
    runs: dict[str, list[tuple[int, bool]]] = defaultdict(list)
    for record in records:
        value = verdict(record)
        if value is None or value == "skip":
            continue
        runs[case_key(record)].append((record.pass_index, _passed(value)))
    return {key: [ok for _, ok in sorted(values)] for key, values in runs.items()}


def _rate(records: Sequence[CaseRecord], verdict: Callable[[CaseRecord], str | None]) -> Rate:
    values = [verdict(r) for r in records]
    counted = [v for v in values if v is not None and v != "skip"]
    return Rate.of(sum(1 for v in counted if v == "pass"), len(counted))


def _pass_k_rate(records: Sequence[CaseRecord], verdict: Callable[[CaseRecord], str | None], k: int) -> Rate:
    results = {key: runs for key, runs in _all_pass_by_key(records, verdict).items() if len(runs) >= k}
    if not results:
        return Rate.of(0, 0)
    passed = sum(1 for runs in results.values() if all(runs[:k]))
    rate = Rate.of(passed, len(results))
    share = float(stats.pass_k(results, k))
    return rate.model_copy(update={"rate": share})


def _grouped(records: Sequence[CaseRecord], keys: Callable[[CaseRecord], Iterable[str]]) -> dict[str, list[CaseRecord]]:
    groups: dict[str, list[CaseRecord]] = defaultdict(list)
    for record in records:
        for key in keys(record):
            groups[key].append(record)
    return dict(sorted(groups.items()))


def _by(records: Sequence[CaseRecord], keys: Callable[[CaseRecord], Iterable[str]],
        verdict: Callable[[CaseRecord], str | None]) -> dict[str, Rate]:
    return {key: _rate(group, verdict) for key, group in _grouped(records, keys).items()}


def _overall(record: CaseRecord) -> str:
    return record.status


def _execution(record: CaseRecord) -> str | None:
    return record.execution_status


def _accuracy(scored: Sequence[CaseRecord], passes: int) -> Accuracy:
    k = max(1, passes)
    return Accuracy(
        overall=_rate(scored, _overall),
        lenient=_rate(scored, lenient_status),
        generated=_rate(scored, generated_status),
        execution=_rate(scored, _execution),
        execution_lenient=_rate(scored, execution_lenient_status),
        pass_k=PassK(
            k=k,
            overall=_pass_k_rate(scored, _overall, k),
            lenient=_pass_k_rate(scored, lenient_status, k),
            execution=_pass_k_rate(scored, _execution, k),
        ),
        by_tag=_by(scored, lambda r: r.tags, _overall),
        by_difficulty=_by(scored, lambda r: [r.difficulty] if r.difficulty else [], _overall),
        by_source=_by(scored, lambda r: [r.source], _overall),
        generated_by_source=_by(scored, lambda r: [r.source], generated_status),
    )


def _summary(records: Sequence[CaseRecord]) -> Summary:
    roles: dict[str, dict[str, int]] = {}
    total = dict.fromkeys(VERDICTS, 0)
    for record in records:
        counts = roles.setdefault(record.role, dict.fromkeys(VERDICTS, 0))
        counts[record.status] += 1
        total[record.status] += 1
    return Summary(roles=dict(sorted(roles.items())), total=total)


def _scores(scored: Sequence[CaseRecord], order: Sequence[str]) -> dict[str, ScorerSummary]:
    tallies: dict[str, ScorerSummary] = {}
    values: dict[str, list[float]] = defaultdict(list)
    names = list(order) + sorted({n for r in scored for n in r.scores} - set(order))
    for name in names:
        tally = ScorerSummary()
        for record in scored:
            score = record.scores.get(name)
            if score is None or not score.applies:
                continue
            tally.applied += 1
            if score.errored:
                tally.errored += 1
            elif score.passed:
                tally.passed += 1
            else:
                tally.failed += 1
            if score.value is not None:
                values[name].append(score.value)
        if tally.applied or name in order:
            tally.mean = sum(values[name]) / len(values[name]) if values[name] else None
            tallies[name] = tally
    return tallies


def _count(value: Any) -> float:
    if isinstance(value, (list, tuple, set, dict)):
        return float(len(value))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return 0.0


def _retrieval(scored: Sequence[CaseRecord]) -> RetrievalSummary | None:
    details: list[dict[str, Any]] = []
    for record in scored:
        score = record.scores.get("retrieval_recall")
        if score is None or score.passed is None:
            continue
        detail = score.detail if "table_recall" in score.detail else (record.retrieval or {})
        if "table_recall" in detail or "column_recall" in detail:
            details.append(detail)
    if not details:
        return None
    n = len(details)
    table = [float(d.get("table_recall", 0.0)) for d in details]
    column = [float(d.get("column_recall", 0.0)) for d in details]
    return RetrievalSummary(
        cases=n,
        table_recall=sum(table) / n,
        column_recall=sum(column) / n,
        perfect_tables=sum(1 for v in table if v >= 1.0),
        perfect_columns=sum(1 for v in column if v >= 1.0),
        tables_sent=sum(_count(d.get("tables_sent")) for d in details) / n,
        columns_sent=sum(_count(d.get("columns_sent")) for d in details) / n,
    )


def _routing(scored: Sequence[CaseRecord]) -> RoutingSummary | None:
    top1: list[bool] = []
    shortlist: list[bool] = []
    for record in scored:
        score = record.scores.get("routing")
        if score is None or score.passed is None:
            continue
        if isinstance(score.detail.get("top1"), bool) and isinstance(score.detail.get("shortlist"), bool):
            top1.append(score.detail["top1"])
            shortlist.append(score.detail["shortlist"])
    if not top1:
        return None
    return RoutingSummary(cases=len(top1), top1=Rate.of(sum(top1), len(top1)),
                          shortlist=Rate.of(sum(shortlist), len(shortlist)))


def _answerability(scored: Sequence[CaseRecord], mode: str) -> Answerability | None:
    if mode == "retrieval":
        return None  # the resolver's answerability check is an LLM call and is not run
    unanswerable = [r for r in scored if r.expected == "unanswerable"]
    answerable = [r for r in scored if r.expected == "allowed"]
    if not unanswerable and not answerable:
        return None
    declined = [r for r in unanswerable if r.error_code == QUESTION_NOT_ANSWERABLE]
    wrongly = [r for r in answerable if r.error_code == QUESTION_NOT_ANSWERABLE]
    return Answerability(correctly_declined=Rate.of(len(declined), len(unanswerable)),
                         wrongly_declined=Rate.of(len(wrongly), len(answerable)))


def _faithfulness(scored: Sequence[CaseRecord]) -> Faithfulness | None:
    checked: list[tuple[CaseRecord, dict[str, Any]]] = []
    for record in scored:
        detail = record.faithfulness
        if detail is None:
            score = record.scores.get("faithfulness")
            if score is None or score.passed is None:
                continue
            detail = {"faithful": score.passed, **score.detail}
        if "faithful" in detail:
            checked.append((record, detail))
    if not checked:
        return None
    unfaithful = [
        Unfaithful(case=r.case_id, role=r.role, pass_index=r.pass_index,
                   unsupported_numbers=list(d.get("unsupported_numbers") or []),
                   unsupported_entities=list(d.get("unsupported_entities") or []))
        for r, d in checked if not d.get("faithful")
    ]
    faithful = len(checked) - len(unfaithful)
    return Faithfulness(answers=len(checked), faithful=faithful, rate=faithful / len(checked),
                        unfaithful=unfaithful)


def _with_reruns(records: Sequence[CaseRecord]) -> list[CaseRecord]:
    """The runs that spent tokens: each record and its curated-off rerun."""
    out: list[CaseRecord] = []
    for record in records:
        out.append(record)
        if record.generated is not None:
            out.append(record.generated)
    return out


def _output(record: CaseRecord) -> tuple[str | None, str | None]:
    """What must repeat across passes: the SQL and rows, or in mode retrieval (which has
    neither) what was sent and the routing ranking."""
    if record.mode == "retrieval":
        sent = None if record.retrieval is None else json.dumps(record.retrieval, sort_keys=True)
        return sent, None if record.routed is None else ",".join(record.routed)
    return record.sql, record.rows_sha256


def _determinism(scored: Sequence[CaseRecord], passes: int) -> Determinism | None:
    if passes < 2:
        return None
    runs: dict[str, list[tuple[int, tuple[str | None, str | None]]]] = defaultdict(list)
    for record in scored:
        runs[case_key(record)].append((record.pass_index, _output(record)))
    multi = {key: [v for _, v in sorted(values)] for key, values in runs.items() if len(values) > 1}
    if not multi:
        return None
    found = stats.determinism(multi)
    return Determinism(
        deterministic_cases=int(found.deterministic_cases),
        total_cases=int(found.total_cases),
        rate=float(found.rate),
        nondeterministic=sorted(found.nondeterministic),
    )


def _latency(values: Sequence[float]) -> Latency:
    if not values:
        return Latency()
    summary = stats.latency_summary(list(values))
    get = summary.get if isinstance(summary, dict) else lambda name: getattr(summary, name)
    return Latency(mean=float(get("mean")), p50=float(get("p50")), p95=float(get("p95")))


def build_board(config: str, records: Sequence[CaseRecord], meta: RunMeta) -> Board:
    """One config's board. Skipped runs appear in the summary only."""
    scored = [r for r in records if r.status != "skip"]
    spending = _with_reruns(scored)
    tokens: dict[str, Usage] = {}
    for record in spending:
        for node, usage in record.usage.items():
            tokens[node] = tokens.get(node, Usage()) + usage
    total_usd = sum(r.cost_usd for r in spending if r.cost_usd is not None)
    config_meta = meta.configs.get(config, ConfigMeta())
    unknown = max(config_meta.unknown_cost_calls, sum(r.unknown_cost_calls for r in spending))
    errors: dict[str, int] = defaultdict(int)
    for record in scored:
        if record.error_code:
            errors[record.error_code] += 1
    models = dict(config_meta.models)
    if not models:
        for record in records:
            for node, model in record.models.items():
                models.setdefault(node, model)
    return Board(
        config=config,
        accuracy=_accuracy(scored, meta.passes),
        summary=_summary(records),
        scores=_scores(scored, meta.scorers),
        retrieval=_retrieval(scored),
        routing=_routing(scored),
        answerability=_answerability(scored, meta.mode),
        faithfulness=_faithfulness(scored),
        tokens_by_node=dict(sorted(tokens.items())),
        cost=Cost(total_usd=total_usd, per_case_usd=total_usd / len(scored) if scored else 0.0,
                  unknown_cost_calls=unknown),
        latency=_latency([r.latency_s for r in scored]),
        retries=Retries(total=sum(r.retries for r in scored),
                        cases_with_retries=sum(1 for r in scored if r.retries > 0)),
        errors_by_code=dict(sorted(errors.items())),
        determinism=_determinism(scored, meta.passes),
        models=dict(sorted(models.items())),
        planned_cases=config_meta.planned_cases or len(records),
        completed_cases=config_meta.completed_cases or len(records),
        results=list(records),
    )


def _comparison(boards: dict[str, Board]) -> Comparison | None:
    if len(boards) < 2:
        return None
    names = list(boards)
    reference = names[0]
    headlines = {
        name: ConfigHeadline(
            overall=b.accuracy.overall, lenient=b.accuracy.lenient, execution=b.accuracy.execution,
            generated=b.accuracy.generated, pass_k=b.accuracy.pass_k.overall,
            cost_per_case_usd=b.cost.per_case_usd,
        )
        for name, b in boards.items()
    }
    ref_runs = _all_pass_by_key(boards[reference].results, _overall)
    differences = []
    for name in names[1:]:
        runs = _all_pass_by_key(boards[name].results, _overall)
        shared = [key for key in ref_runs if key in runs]
        here = sorted(k for k in shared if all(runs[k]) and not all(ref_runs[k]))
        there = sorted(k for k in shared if all(ref_runs[k]) and not all(runs[k]))
        differences.append(CaseDifferences(
            config=name, reference=reference, passes_only_here=here, passes_only_in_reference=there,
            p_value=float(stats.mcnemar_exact(len(there), len(here))),
        ))
    return Comparison(reference=reference, headlines=headlines, differences=differences)


def build_report(records: list[CaseRecord], meta: RunMeta) -> EvalReport:
    """Group the records by config (in ``meta.configs`` order, then any others as they come)
    and build a board for each."""
    grouped: dict[str, list[CaseRecord]] = {name: [] for name in meta.configs}
    for record in records:
        grouped.setdefault(record.config, []).append(record)
    boards = {name: build_board(name, group, meta) for name, group in grouped.items()}
    return EvalReport(
        mode=meta.mode, suites=meta.suites, roles=meta.roles, passes=meta.passes, curated=meta.curated,
        clarify=meta.clarify, max_cost_usd=meta.max_cost_usd, spent=meta.spent, stopped=meta.stopped,
        skipped=meta.skipped, settings=meta.settings, databases=meta.databases, configs=boards,
        comparison=_comparison(boards), scorers=meta.scorers, run_stamp=meta.run_stamp,
        comparator_version=meta.comparator_version,
    )


# ---------------------------------------------------------------- Markdown


def percent(value: float) -> str:
    return f"{value * 100:.1f}%"


def rate_cell(rate: Rate) -> str:
    """``57.4% (43.3%–70.5%)``, or ``n/a`` when nothing was counted."""
    if rate.total == 0:
        return "n/a"
    return f"{percent(rate.rate)} ({percent(rate.low)}–{percent(rate.high)})"


def md_escape(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def to_markdown(board: Board) -> str:
    """A board as Markdown tables: accuracies with intervals, pass^k, cost, latency, failures."""
    acc = board.accuracy
    lines = [
        f"### {md_escape(board.config)}",
        "",
        "| measure | passed | total | rate (95% CI) |",
        "| --- | ---: | ---: | --- |",
    ]
    for label, rate in (
        ("overall", acc.overall), ("lenient", acc.lenient), ("execution", acc.execution),
        ("execution, lenient", acc.execution_lenient), ("generated", acc.generated),
        (f"pass^{acc.pass_k.k} overall", acc.pass_k.overall),
        (f"pass^{acc.pass_k.k} execution", acc.pass_k.execution),
    ):
        lines.append(f"| {label} | {rate.passed} | {rate.total} | {rate_cell(rate)} |")
    total = board.summary.total
    lines += [
        "",
        f"Cases: {total['pass']} pass, {total['fail']} fail, {total['error']} error, {total['skip']} skip "
        f"({board.completed_cases} of {board.planned_cases} planned).",
        f"Cost per case: ${board.cost.per_case_usd:.4f} (total ${board.cost.total_usd:.4f}"
        + (f", {board.cost.unknown_cost_calls} calls not priced" if board.cost.unknown_cost_calls else "")
        + ").",
        f"Latency: mean {board.latency.mean:.2f} s, p50 {board.latency.p50:.2f} s, p95 {board.latency.p95:.2f} s.",
    ]
    if board.retrieval is not None:
        r = board.retrieval
        lines.append(f"Retrieval: table recall {percent(r.table_recall)}, column recall {percent(r.column_recall)} "
                     f"(every table {r.perfect_tables} of {r.cases}, every column {r.perfect_columns} of {r.cases}); "
                     f"sent {r.tables_sent:.1f} tables and {r.columns_sent:.1f} columns on average.")
    if board.routing is not None:
        lines.append(f"Routing: top-1 {rate_cell(board.routing.top1)}, shortlist {rate_cell(board.routing.shortlist)}.")
    if board.determinism is not None:
        d = board.determinism
        lines.append(f"Determinism: {d.deterministic_cases} of {d.total_cases} cases identical across passes.")
    failures = [r for r in board.results if r.status in ("fail", "error")]
    if failures:
        lines += ["", "| case | role | pass | status | reason |", "| --- | --- | ---: | --- | --- |"]
        for r in failures:
            reason = r.reason or r.error_message or r.error_code or ""
            lines.append(f"| {md_escape(r.case_id)} | {md_escape(r.role)} | {r.pass_index} | {r.status} "
                         f"| {md_escape(reason)} |")
    return "\n".join(lines) + "\n"
