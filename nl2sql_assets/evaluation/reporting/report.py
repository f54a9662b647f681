"""The eval report: one board per config, built from the case records a run produced.

A board turns case records into the numbers people read (accuracies with Wilson intervals,
pass^k, cost, latency, scorer tallies) while keeping the records themselves, so the gate and
the benchmark records can always go back to the case level instead of trusting a headline.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, computed_field, model_validator

from nl2sql_assets.atomic import atomic_write
from nl2sql_assets.config import StrictModel
from nl2sql_assets.engine.result import QUESTION_NOT_ANSWERABLE
from nl2sql_assets.errors import validation_summary
from nl2sql_assets.evaluation.judging import stats
from nl2sql_assets.evaluation.judging.scorers import (
    LEGACY_SUMMARY_KEYS,
    Scored,
    ScorerSummary,
    Verdict,
    pop_legacy_summaries,
)
from nl2sql_assets.evaluation.judging.scorers import execution_lenient_status as execution_lenient
from nl2sql_assets.evaluation.judging.stats import Rate, rate_cell
from nl2sql_assets.evaluation.reporting.coverage import (
    Coverage,
    DomainRates,
    by_domain,
    coverage,
    coverage_line,
    domains_markdown,
    execution_success,
    is_query,
)
from nl2sql_assets.evaluation.reporting.uplift import CandidateUplift, candidate_uplift
from nl2sql_assets.evaluation.running.modes import get_mode
from nl2sql_assets.evaluation.running.results import (
    CaseRecord,
    ConfigMeta,
    DatabaseRef,
    RunFacts,
    RunMeta,
)
from nl2sql_assets.evaluation.running.scorers import scorer_class
from nl2sql_assets.llm.calls import TokenSource, Usage, combine_sources
from nl2sql_assets.redact import redact

VERDICTS: tuple[str, ...] = ("pass", "fail", "error", "skip")


# ---------------------------------------------------------------- the board


class PassK(StrictModel):
    """Cases that passed in every one of ``k`` passes (a case with fewer runs than k is left out)."""

    k: int
    overall: Rate
    lenient: Rate
    execution: Rate
    execution_lenient: Rate | None = None  # None on boards made before it was kept


class Accuracy(StrictModel):
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


class Summary(StrictModel):
    """Verdict counts (keys pass, fail, error, skip) per role and over all roles."""

    roles: dict[str, dict[str, int]] = Field(default_factory=dict)
    total: dict[str, int] = Field(default_factory=lambda: dict.fromkeys(VERDICTS, 0))


class ScorerTally(StrictModel):
    """One scorer on a board: its tally over the runs it applied to, and its own summary (the
    scorer's ``summary_model`` as JSON; see ``Board.summaries``)."""

    applied: int = 0
    passed: int = 0
    failed: int = 0
    errored: int = 0
    mean: float | None = None  # mean value over the runs it gave a value
    summary: dict[str, Any] | None = None


class Answerability(StrictModel):
    correctly_declined: Rate  # over runs expected unanswerable
    wrongly_declined: Rate  # over runs expected to be answered


class Cost(StrictModel):
    total_usd: float = 0.0  # equals the run's spent; a lower bound when unknown_cost_calls > 0
    per_case_usd: float = 0.0
    unknown_cost_calls: int = 0
    estimated_calls: int = 0  # calls counted with the model's tokenizer (the provider reported no usage)
    #: measured: every token as the provider reported it; estimated / mixed: some or all counted by us
    token_source: TokenSource | None = None


class NodeLatency(StrictModel):
    p50: float = 0.0
    p95: float = 0.0
    max: float = 0.0


class Latency(StrictModel):
    """Seconds per question run after warm-up: the runs that carried the one-time costs (see
    ``CaseRecord.warmup``) are counted apart, with the longest of them."""

    mean: float = 0.0
    p50: float = 0.0
    p95: float = 0.0
    max: float = 0.0
    warmup_runs: int = 0
    warmup_max: float = 0.0
    by_node: dict[str, NodeLatency] = Field(default_factory=dict)  # seconds per node, after warm-up
    oracle_p50: float | None = None  # the gold SQL alone (median of 3 per case), over the cases timed


class CuratedHits(StrictModel):
    """Verified answers found, over the question runs made with curated answers on: by the same
    text, or by the curated node judging a paraphrase."""

    runs: int = 0
    exact: int = 0
    paraphrase: int = 0
    hit_rate: float = 0.0


class Retries(StrictModel):
    total: int = 0
    cases_with_retries: int = 0


class Determinism(StrictModel):
    deterministic_cases: int
    total_cases: int
    rate: float
    nondeterministic: list[str] = Field(default_factory=list)


class Board(StrictModel):
    """One config's results. Intervals are taken over the runs scored; with several passes
    the runs of one case are not independent, so they read narrower than they are (pass^k
    counts cases and does not have that problem)."""

    config: str
    accuracy: Accuracy
    summary: Summary
    scores: dict[str, ScorerTally] = Field(default_factory=dict)
    answerability: Answerability | None = None
    tokens_by_node: dict[str, Usage] = Field(default_factory=dict)
    cost: Cost = Field(default_factory=Cost)
    latency: Latency = Field(default_factory=Latency)
    retries: Retries = Field(default_factory=Retries)
    curated: CuratedHits | None = None  # None: curated answers were off
    errors_by_code: dict[str, int] = Field(default_factory=dict)
    #: case runs the provider failed (an outage), by kind; left out of every accuracy
    env_errors: dict[str, int] = Field(default_factory=dict)
    determinism: Determinism | None = None
    models: dict[str, str] = Field(default_factory=dict)
    planned_cases: int = 0
    completed_cases: int = 0
    #: allowed runs of answerable cases whose SQL ran, right or wrong (None: nothing executed)
    execution_success: Rate | None = None
    by_domain: dict[str, DomainRates] = Field(default_factory=dict)
    coverage: Coverage | None = None
    #: selected vs first candidate on runs that tried candidate plans (None: none did)
    candidate_uplift: CandidateUplift | None = None
    results: list[CaseRecord] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _summaries_under_their_scorers(cls, data: Any) -> Any:
        """Boards written before scorers owned their summaries kept three of them beside the
        tallies; each moves under its scorer's tally."""
        if not isinstance(data, dict) or not LEGACY_SUMMARY_KEYS.keys() & data.keys():
            return data
        data = dict(data)
        scores = {name: dict(tally) for name, tally in (data.get("scores") or {}).items()}
        for scorer, summary in pop_legacy_summaries(data).items():
            scores.setdefault(scorer, {})["summary"] = summary
        data["scores"] = scores
        return data

    def summaries(self) -> dict[str, ScorerSummary]:
        """What each scorer contributes, typed by its scorer's ``summary_model``, in the tallies'
        order. A summary whose scorer is not installed here is left out (its JSON stays)."""
        out: dict[str, ScorerSummary] = {}
        for name, tally in self.scores.items():
            model = getattr(scorer_class(name), "summary_model", None) if tally.summary is not None else None
            if model is not None:
                out[name] = model.model_validate(tally.summary)
        return out

    def summary_metrics(self) -> dict[str, float]:
        """Every scorer's numbers to plot, in one mapping (Dagster metadata)."""
        return {key: value for summary in self.summaries().values() for key, value in summary.metrics().items()}

    # The three summaries boards once kept under their own names, for the readers that use them.
    @property
    def retrieval(self) -> ScorerSummary | None:
        return self.summaries().get(LEGACY_SUMMARY_KEYS["retrieval"])

    @property
    def routing(self) -> ScorerSummary | None:
        return self.summaries().get(LEGACY_SUMMARY_KEYS["routing"])

    @property
    def faithfulness(self) -> ScorerSummary | None:
        return self.summaries().get(LEGACY_SUMMARY_KEYS["faithfulness"])


# ---------------------------------------------------------------- several configs side by side


class ConfigHeadline(StrictModel):
    overall: Rate
    lenient: Rate
    execution: Rate
    generated: Rate
    pass_k: Rate
    cost_per_case_usd: float


class CaseDifferences(StrictModel):
    """Cases (``case_id@role``, passed = every pass passed) that differ from the first config."""

    config: str
    reference: str
    measure: Literal["overall"] = "overall"
    passes_only_here: list[str] = Field(default_factory=list)
    passes_only_in_reference: list[str] = Field(default_factory=list)
    p_value: float = 1.0  # McNemar exact, two-sided, on those flips


class Comparison(StrictModel):
    reference: str
    headlines: dict[str, ConfigHeadline]
    differences: list[CaseDifferences] = Field(default_factory=list)


# ---------------------------------------------------------------- the report


class EvalReport(RunFacts):
    """A run's boards, one per config, and their comparison when there are several."""

    configs: dict[str, Board] = Field(default_factory=dict)
    comparison: Comparison | None = None
    #: A summary report (the CLI's ``--out``): its boards' case records are in this JSON Lines
    #: file, relative to the report (``reporting.streamed``); ``load_report`` reads them back.
    records_file: str | None = Field(default=None, exclude_if=lambda v: v is None)

    @model_validator(mode="before")
    @classmethod
    def _drop_derived(cls, data: Any) -> Any:
        """The derived fields a saved report carries are recomputed on load."""
        if isinstance(data, dict) and ("accuracy" in data or "accuracy_generated" in data):
            data = {k: v for k, v in data.items() if k not in ("accuracy", "accuracy_generated")}
        return data

    @property
    def first_board(self) -> Board | None:
        return next(iter(self.configs.values()), None)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def database(self) -> DatabaseRef | None:
        """The first datasource the run's cases name (``databases`` lists them all)."""
        return self.databases[0] if self.databases else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def accuracy(self) -> float:
        """What users see, on the first config's board."""
        board = self.first_board
        return board.accuracy.overall.rate if board else 0.0

    @computed_field  # type: ignore[prop-decorator]
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
        report = EvalReport.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the report: {exc}") from exc
    except ValueError as exc:
        raise ValueError(f"{path}: not an eval report: {validation_summary(exc)}") from exc
    if report.records_file is not None:  # a summary: its case records lie beside it
        from nl2sql_assets.evaluation.reporting.streamed import with_records

        report = with_records(report, path)
    return report


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


def execution_lenient_status(record: CaseRecord) -> Verdict | None:
    """Execution accuracy with result_match read leniently (see judging's ``execution_lenient_status``)."""
    return execution_lenient(record.scores, record.execution_status)


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
            execution_lenient=_pass_k_rate(scored, execution_lenient_status, k),
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


def _scores(scored: Sequence[CaseRecord], order: Sequence[str],
            classes: Mapping[str, type] | None = None) -> dict[str, ScorerTally]:
    """Each scorer's tally, and its own summary when it has ``summarize`` (and is installed here,
    or given in ``classes``: a run's own in-code scorers)."""
    tallies: dict[str, ScorerTally] = {}
    values: dict[str, list[float]] = defaultdict(list)
    names = list(order) + sorted({n for r in scored for n in r.scores} - set(order))
    for name in names:
        tally = ScorerTally()
        runs: list[Scored] = []
        for record in scored:
            score = record.scores.get(name)
            if score is None:
                continue
            runs.append(Scored(case_id=record.case_id, role=record.role, pass_index=record.pass_index, score=score))
            if not score.applies:
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
            cls = (classes or {}).get(name) or scorer_class(name)
            summarize = getattr(cls, "summarize", None)
            summary = summarize(runs) if callable(summarize) else None
            tally.summary = summary.model_dump(mode="json") if summary is not None else None
            tallies[name] = tally
    return tallies


def _answerability(scored: Sequence[CaseRecord], mode: str) -> Answerability | None:
    if not get_mode(mode).executes:
        return None  # the resolver's answerability check runs only when the whole engine does
    unanswerable = [r for r in scored if r.expected == "unanswerable"]
    answerable = [r for r in scored if r.expected == "allowed"]
    if not unanswerable and not answerable:
        return None
    declined = [r for r in unanswerable if r.error_code == QUESTION_NOT_ANSWERABLE]
    wrongly = [r for r in answerable if r.error_code == QUESTION_NOT_ANSWERABLE]
    return Answerability(correctly_declined=Rate.of(len(declined), len(unanswerable)),
                         wrongly_declined=Rate.of(len(wrongly), len(answerable)))


def _with_reruns(records: Sequence[CaseRecord]) -> list[CaseRecord]:
    """The runs that spent tokens: each record and its curated-off rerun."""
    out: list[CaseRecord] = []
    for record in records:
        out.append(record)
        if record.generated is not None:
            out.append(record.generated)
    return out


def _output(record: CaseRecord) -> tuple[str | None, str | None]:
    """What must repeat across passes: the SQL and rows, or in a mode that executes nothing
    (retrieval) what was sent and the routing ranking."""
    if not get_mode(record.mode).executes:
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


def _percentiles(values: Sequence[float]) -> tuple[float, float, float, float]:
    """(mean, p50, p95, max)."""
    summary = stats.latency_summary(list(values))
    get = summary.get if isinstance(summary, dict) else lambda name: getattr(summary, name)
    return float(get("mean")), float(get("p50")), float(get("p95")), float(max(values))


def _latency(queries: Sequence[CaseRecord]) -> Latency:
    if not queries:
        return Latency()
    cold = [r for r in queries if r.warmup]
    warm = [r for r in queries if not r.warmup] or cold  # nothing but warm-up: show it, flagged
    mean, p50, p95, top = _percentiles([r.latency_s for r in warm])
    nodes: dict[str, list[float]] = defaultdict(list)
    for record in warm:
        for node, seconds in record.timings.items():
            nodes[node].append(seconds)
    by_node = {}
    for node, values in sorted(nodes.items()):
        _, n50, n95, nmax = _percentiles(values)
        by_node[node] = NodeLatency(p50=n50, p95=n95, max=nmax)
    oracle = sorted({(r.case_id, r.oracle_latency_s) for r in queries if r.oracle_latency_s is not None})
    return Latency(mean=mean, p50=p50, p95=p95, max=top, warmup_runs=len(cold),
                   warmup_max=max((r.latency_s for r in cold), default=0.0), by_node=by_node,
                   oracle_p50=statistics.median(t for _, t in oracle) if oracle else None)


def _curated_hits(queries: Sequence[CaseRecord]) -> CuratedHits:
    exact = sum(1 for r in queries if r.curated_match == "exact")
    paraphrase = sum(1 for r in queries if r.curated_match == "paraphrase")
    return CuratedHits(runs=len(queries), exact=exact, paraphrase=paraphrase,
                       hit_rate=(exact + paraphrase) / len(queries) if queries else 0.0)


def build_board(config: str, records: Sequence[CaseRecord], meta: RunMeta,
                scorer_classes: Mapping[str, type] | None = None) -> Board:
    """One config's board. Skipped runs appear in the summary only; latency and cost per case are
    over the runs that ask a question (a policy probe asks none). A run the provider failed (an
    environment error) is counted apart and left out of every rate: it says nothing of the model."""
    outages = [r for r in records if r.env_error is not None]
    scored = [r for r in records if r.status != "skip" and r.env_error is None]
    queries = [r for r in scored if is_query(r)]
    spending = _with_reruns([*scored, *outages])
    tokens: dict[str, Usage] = {}
    for record in spending:
        for node, usage in record.usage.items():
            tokens[node] = tokens.get(node, Usage()) + usage
    total_usd = sum(r.cost_usd for r in spending if r.cost_usd is not None)
    config_meta = meta.configs.get(config, ConfigMeta())
    unknown = max(config_meta.unknown_cost_calls, sum(r.unknown_cost_calls for r in spending))
    estimated = max(config_meta.estimated_calls, sum(r.estimated_calls for r in spending))
    source = config_meta.token_source or combine_sources(r.token_source for r in spending)
    env_errors: dict[str, int] = defaultdict(int)
    for record in outages:
        assert record.env_error is not None
        env_errors[record.env_error] += 1
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
        scores=_scores(scored, meta.scorers, scorer_classes),
        answerability=_answerability(scored, meta.mode),
        tokens_by_node=dict(sorted(tokens.items())),
        cost=Cost(total_usd=total_usd, per_case_usd=total_usd / len(queries) if queries else 0.0,
                  unknown_cost_calls=unknown, estimated_calls=estimated, token_source=source),
        latency=_latency(queries),
        curated=_curated_hits(queries) if meta.curated else None,
        retries=Retries(total=sum(r.retries for r in scored),
                        cases_with_retries=sum(1 for r in scored if r.retries > 0)),
        errors_by_code=dict(sorted(errors.items())),
        env_errors=dict(sorted(env_errors.items())),
        determinism=_determinism(scored, meta.passes),
        models=dict(sorted(models.items())),
        planned_cases=config_meta.planned_cases or len(records),
        completed_cases=config_meta.completed_cases or len(records),
        execution_success=execution_success(scored),
        by_domain=by_domain(records),
        coverage=coverage(records),
        candidate_uplift=candidate_uplift(scored),
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


def build_report(records: list[CaseRecord], meta: RunMeta,
                 scorer_classes: Mapping[str, type] | None = None) -> EvalReport:
    """Group the records by config (in ``meta.configs`` order, then any others as they come)
    and build a board for each. ``scorer_classes`` name scorers not registered in this process
    (a run's in-code scorers) so their summaries reach the boards."""
    grouped: dict[str, list[CaseRecord]] = {name: [] for name in meta.configs}
    for record in records:
        grouped.setdefault(record.config, []).append(record)
    boards = {name: build_board(name, group, meta, scorer_classes) for name, group in grouped.items()}
    facts = {name: getattr(meta, name) for name in RunFacts.model_fields}
    return EvalReport(**facts, configs=boards, comparison=_comparison(boards))


# ---------------------------------------------------------------- Markdown


def md_escape(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def comparison_markdown(report: EvalReport) -> str:
    """Every config's headline side by side: execution accuracy with its interval, lenient and
    overall accuracy, cost per case and median latency."""
    rows = []
    for name, board in report.configs.items():
        a = board.accuracy
        rows.append(f"| {md_escape(name)} | {a.execution.rate:.1%} ({a.execution.low:.1%}-{a.execution.high:.1%}) | "
                    f"{a.lenient.rate:.1%} | {a.overall.rate:.1%} | ${board.cost.per_case_usd:.4f} | "
                    f"{board.latency.p50:.2f}s |")
    return ("| config | execution (95% CI) | lenient | overall | cost/case | p50 |\n"
            "|---|---|---|---|---|---|\n" + "\n".join(rows))


def _latency_line(lat: Latency) -> str:
    line = (f"Latency after warm-up: mean {lat.mean:.2f} s, p50 {lat.p50:.2f} s, p95 {lat.p95:.2f} s, "
            f"max {lat.max:.2f} s")
    if lat.warmup_runs:
        line += f" ({lat.warmup_runs} warm-up run(s) apart, the longest {lat.warmup_max:.2f} s)"
    if lat.oracle_p50 is not None:
        line += f"; the gold SQL alone: p50 {lat.oracle_p50 * 1000:.1f} ms"
    return line + "."


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
        *((("execution success (SQL ran)", board.execution_success),) if board.execution_success else ()),
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
        _latency_line(board.latency),
    ]
    lines += [line for summary in board.summaries().values() if (line := summary.markdown())]
    if board.coverage is not None:
        lines.append(coverage_line(board.coverage))
    if board.candidate_uplift is not None:
        lines.append(board.candidate_uplift.markdown())
    if board.by_domain:
        lines += ["", domains_markdown(board.by_domain), ""]
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
