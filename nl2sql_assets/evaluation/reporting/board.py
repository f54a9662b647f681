"""The report's model: a board per config (accuracies with Wilson intervals, pass^k, cost,
latency, scorer tallies, the case records themselves) and the report file, whole or as a summary
whose case records lie beside it (``save_summary``, read back by ``load_report``).

The numbers are computed elsewhere (``tally`` takes them from records, ``report`` builds boards);
this module is what every stage above reads and writes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, computed_field, model_validator

from nl2sql_assets.atomic import atomic_write
from nl2sql_assets.config import StrictModel
from nl2sql_assets.errors import validation_summary
from nl2sql_assets.evaluation.judging.scorers import (
    LEGACY_SUMMARY_KEYS,
    ScorerSummary,
    pop_legacy_summaries,
)
from nl2sql_assets.evaluation.judging.stats import Rate
from nl2sql_assets.evaluation.reporting.coverage import Coverage, DomainRates
from nl2sql_assets.evaluation.reporting.streamed import read_records
from nl2sql_assets.evaluation.reporting.uplift import CandidateUplift
from nl2sql_assets.evaluation.running.results import CaseRecord, DatabaseRef, RunFacts
from nl2sql_assets.evaluation.running.scorers import scorer_class
from nl2sql_assets.llm.calls import TokenSource, Usage
from nl2sql_assets.redact import redact

#: The columns of a board's per-role summary: the verdicts, and the case runs an environment error
#: ended (an outage, quota, auth: no verdict on the model, left out of accuracy), in their own.
SUMMARY_COLUMNS: tuple[str, ...] = ("pass", "fail", "error", "env_error", "skip")


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
        report = with_records(report, path)
    return report


# ---------------------------------------------------------------- summaries


def summary_of(report: EvalReport, records_file: str) -> EvalReport:
    """The report without its case records, pointing at ``records_file`` (relative to it)."""
    boards = {name: board.model_copy(update={"results": []}) for name, board in report.configs.items()}
    return report.model_copy(update={"configs": boards, "records_file": records_file})


def save_summary(report: EvalReport, path: str | Path, records: Path) -> Path:
    """Write the summary report at ``path``; ``records`` lies beside it."""
    path = Path(path)
    rel = os.path.relpath(records, path.parent)
    return save_report(summary_of(report, rel), path)


def with_records(report: EvalReport, report_path: Path) -> EvalReport:
    """A summary report with its boards' records read back from its records file."""
    assert report.records_file is not None
    path = report_path.parent / report.records_file
    grouped: dict[str, list[Any]] = {name: [] for name in report.configs}
    try:
        for rec in read_records(path):
            grouped.setdefault(rec.config, []).append(rec)
    except OSError as exc:
        raise ValueError(f"{report_path}: cannot read its case records {path}: {exc}") from exc
    unknown = [c for c in grouped if c not in report.configs]
    if unknown:
        raise ValueError(f"{path}: records of config(s) {unknown} that the report {report_path} has no board for")
    boards = {name: board.model_copy(update={"results": grouped[name]}) for name, board in report.configs.items()}
    return report.model_copy(update={"configs": boards, "records_file": None})
