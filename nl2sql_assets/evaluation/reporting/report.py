"""The eval report: one board per config, built from the case records a run produced.

A board turns case records into the numbers people read (accuracies with Wilson intervals,
pass^k, cost, latency, scorer tallies) while keeping the records themselves, so the gate and
the benchmark records can always go back to the case level instead of trusting a headline.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, computed_field, model_validator

from nl2sql_assets.atomic import atomic_write
from nl2sql_assets.config import StrictModel
from nl2sql_assets.errors import validation_summary
from nl2sql_assets.evaluation.judging import stats
from nl2sql_assets.evaluation.judging.scorers import (
    LEGACY_SUMMARY_KEYS,
    ScorerSummary,
    pop_legacy_summaries,
)
from nl2sql_assets.evaluation.judging.stats import Rate, rate_cell
from nl2sql_assets.evaluation.reporting.coverage import (
    Coverage,
    DomainRates,
    coverage_line,
    domains_markdown,
)
from nl2sql_assets.evaluation.reporting.tally import (
    SUMMARY_COLUMNS,
    BoardTally,
)
from nl2sql_assets.evaluation.reporting.tally import case_key as case_key
from nl2sql_assets.evaluation.reporting.tally import execution_lenient_status as execution_lenient_status
from nl2sql_assets.evaluation.reporting.tally import generated_status as generated_status
from nl2sql_assets.evaluation.reporting.tally import lenient_status as lenient_status
from nl2sql_assets.evaluation.reporting.uplift import CandidateUplift
from nl2sql_assets.evaluation.running.results import (
    CaseRecord,
    DatabaseRef,
    RunFacts,
    RunMeta,
)
from nl2sql_assets.evaluation.running.scorers import scorer_class
from nl2sql_assets.llm.calls import TokenSource, Usage
from nl2sql_assets.redact import redact

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
    """Case-run counts per role and over all roles: the verdicts (pass, fail, error, skip) and,
    apart, ``env_error``: runs an environment error ended, which are no verdict on the model."""

    roles: dict[str, dict[str, int]] = Field(default_factory=dict)
    total: dict[str, int] = Field(default_factory=lambda: dict.fromkeys(SUMMARY_COLUMNS, 0))

    def line(self, counts: dict[str, int]) -> str:
        """``3 pass, 1 fail, 0 error, 15 environment error, 0 skip`` (older boards: no env column)."""
        words = {"env_error": "environment error"}
        return ", ".join(f"{counts.get(c, 0)} {words.get(c, c)}" for c in SUMMARY_COLUMNS
                         if c != "env_error" or c in counts)


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


class Averages(StrictModel):
    """Spec 003's per-question averages, over the question runs of the board: tokens (with whether
    they were measured or estimated), the service's latency (after warm-up) and the gold SQL's own
    time (over the question runs whose gold was timed)."""

    question_runs: int
    average_input_tokens: float
    average_output_tokens: float
    token_source: TokenSource | None = None
    average_service_latency_ms: float | None = None
    average_oracle_latency_ms: float | None = None
    oracle_timed_runs: int = 0


class CuratedHits(StrictModel):
    """Verified answers found, over the question runs made with curated answers on: by the same
    text, or by the curated node judging a paraphrase."""

    runs: int = 0
    exact: int = 0
    paraphrase: int = 0
    hit_rate: float | None = None  # None: no question runs to count hits over


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
    #: spec 003's averages per question run (None: no question runs; older boards: absent)
    averages: Averages | None = None
    retries: Retries = Field(default_factory=Retries)
    curated: CuratedHits | None = None  # None: curated answers were off
    errors_by_code: dict[str, int] = Field(default_factory=dict)
    #: case runs the provider failed (an outage), by kind; left out of every accuracy
    env_errors: dict[str, int] = Field(default_factory=dict)
    determinism: Determinism | None = None
    models: dict[str, str] = Field(default_factory=dict)
    planned_cases: int = 0
    completed_cases: int = 0
    #: case runs the cost cap stopped in flight (at a call that could pass it): spent, no verdict
    stopped_by_cap: int = 0
    #: allowed runs of answerable cases whose SQL ran, right or wrong (None: nothing executed)
    execution_success: Rate | None = None
    by_domain: dict[str, DomainRates] = Field(default_factory=dict)
    coverage: Coverage | None = None
    #: selected vs first candidate on runs that tried candidate plans (None: none did)
    candidate_uplift: CandidateUplift | None = None
    #: runs that asked a question (not a probe) and were not skipped, outages included; None: a
    #: board written before it was counted (its ``results`` say)
    query_runs: int | None = None
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
        return {key: value for summary in self.summaries().values() for key, value in summary.metrics().items()
                if value is not None}

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
        if isinstance(data, dict) and data.keys() & {"accuracy", "accuracy_generated", "cap_rule"}:
            data = {k: v for k, v in data.items() if k not in ("accuracy", "accuracy_generated", "cap_rule")}
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
    def accuracy(self) -> float | None:
        """What users see, on the first config's board (None: nothing was scored)."""
        board = self.first_board
        return board.accuracy.overall.rate if board else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def accuracy_generated(self) -> float | None:
        """The generated path on the first config's board: the model's own skill (None: nothing scored)."""
        board = self.first_board
        return board.accuracy.generated.rate if board else None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def cap_rule(self) -> str | None:
        """How the dollar cap held this run, in words (None: the run had no cap)."""
        if self.max_cost_usd is None:
            return None
        concurrency = self.settings.get("max_concurrency", 1)
        return (f"${self.max_cost_usd:g} cap, checked before each case run and before each model call (retries "
                f"included): a call that could pass it is not made and its case run stops, counted as stopped by "
                f"the cap. The cap is passed by at most what the calls in flight when it is reached cost, each "
                f"above the dearest call its node made before: with max_concurrency {concurrency}, at most "
                f"{concurrency} call(s). The first case run always runs to its end.")

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


def build_board(config: str, records: Iterable[CaseRecord], meta: RunMeta,
                scorer_classes: Mapping[str, type] | None = None, *, keep_records: bool = True) -> Board:
    """One config's board, in one pass over its records (``reporting.tally``). Skipped runs
    appear in the summary only; latency and cost per case are over the runs that ask a question
    (a policy probe asks none). A run the provider failed (an environment error) is counted apart
    and left out of every rate: it says nothing of the model. ``keep_records``: the board holds
    its records (``results``); a board built from a stream of them leaves it empty."""
    tally = BoardTally(config, meta, scorer_classes)
    kept: list[CaseRecord] = []
    for record in records:
        tally.add(record)
        if keep_records:
            kept.append(record)
    return tally.board(kept)


def _comparison(boards: Mapping[str, Board], runs: Mapping[str, Mapping[str, list[bool]]]) -> Comparison | None:
    """Configs side by side; ``runs``: each config's verdicts by case and pass."""
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
    ref_runs = runs[reference]
    differences = []
    for name in names[1:]:
        mine = runs[name]
        shared = [key for key in ref_runs if key in mine]
        here = sorted(k for k in shared if all(mine[k]) and not all(ref_runs[k]))
        there = sorted(k for k in shared if all(ref_runs[k]) and not all(mine[k]))
        differences.append(CaseDifferences(
            config=name, reference=reference, passes_only_here=here, passes_only_in_reference=there,
            p_value=float(stats.mcnemar_exact(len(there), len(here))),
        ))
    return Comparison(reference=reference, headlines=headlines, differences=differences)


def build_report(records: Iterable[CaseRecord], meta: RunMeta,
                 scorer_classes: Mapping[str, type] | None = None, *, keep_records: bool = True) -> EvalReport:
    """A board for each config (in ``meta.configs`` order, then any others as they come), in one
    pass over ``records`` (a list, or a stream read from a records file: ``keep_records=False``
    leaves the boards' ``results`` empty and holds no record). ``scorer_classes`` name scorers
    not registered in this process (a run's in-code scorers) so their summaries reach the boards."""
    tallies = {name: BoardTally(name, meta, scorer_classes) for name in meta.configs}
    kept: dict[str, list[CaseRecord]] = {name: [] for name in meta.configs}
    for record in records:
        tally = tallies.get(record.config)
        if tally is None:
            tally = tallies[record.config] = BoardTally(record.config, meta, scorer_classes)
        tally.add(record)
        if keep_records:
            kept.setdefault(record.config, []).append(record)
    boards = {name: tally.board(kept.get(name)) for name, tally in tallies.items()}
    runs = {name: tally.all_overall.by_key() for name, tally in tallies.items()}
    facts = {name: getattr(meta, name) for name in RunFacts.model_fields}
    return EvalReport(**facts, configs=boards, comparison=_comparison(boards, runs))


# ---------------------------------------------------------------- Markdown


def md_escape(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _averages_line(a: Averages) -> str:
    tokens = (f"{a.average_input_tokens:,.0f} input / {a.average_output_tokens:,.0f} output tokens"
              + (f" ({a.token_source})" if a.token_source else ""))
    service = f"{a.average_service_latency_ms:,.1f} ms" if a.average_service_latency_ms is not None else "n/a"
    oracle = f"{a.average_oracle_latency_ms:,.2f} ms" if a.average_oracle_latency_ms is not None else "n/a"
    return (f"On average per question run ({a.question_runs}): {tokens}; service latency {service}; "
            f"the gold SQL {oracle}.")


def comparison_markdown(report: EvalReport) -> str:
    """Every config's headline side by side: execution accuracy with its interval, lenient and
    overall accuracy, cost per case and median latency."""
    rows = []
    for name, board in report.configs.items():
        a = board.accuracy
        rows.append(f"| {md_escape(name)} | {a.execution.with_interval('-')} | "
                    f"{a.lenient.text()} | {a.overall.text()} | ${board.cost.per_case_usd:.4f} | "
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
        f"Cases: {board.summary.line(total)} ({board.completed_cases} of {board.planned_cases} planned"
        + (f"; {board.stopped_by_cap} stopped by the cost cap in flight" if board.stopped_by_cap else "") + ")."
        + ("" if len(board.summary.roles) < 2 else " By role: " + "; ".join(
            f"{role} {board.summary.line(counts)}" for role, counts in board.summary.roles.items()) + "."),
        f"Cost per case: ${board.cost.per_case_usd:.4f} (total ${board.cost.total_usd:.4f}"
        + (f", {board.cost.unknown_cost_calls} calls not priced" if board.cost.unknown_cost_calls else "")
        + ").",
        _latency_line(board.latency),
        *((_averages_line(board.averages),) if board.averages is not None else ()),
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
