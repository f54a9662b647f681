"""What a run produces: a CaseRecord per case run, and the RunMeta of the run.

A CaseRecord is the compact, JSON-safe verdict on one case run (what boards, the gate and
records read). Records keep verdicts, reasons, hashes, cost and latency, never whole result sets: the
rows are summarised by ``rows_sha256`` and ``row_count`` so determinism can be checked
across passes without storing data.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal

from pydantic import Field, computed_field, model_validator

from nl2sql_assets.config import StrictModel
from nl2sql_assets.evaluation.judging.scorers import Faithfulness, Score, Verdict
from nl2sql_assets.evaluation.neighbours.audit import AuditFlag
from nl2sql_assets.evaluation.running.isolation import Isolation
from nl2sql_assets.evaluation.running.modes import ModeName, Stopped
from nl2sql_assets.evaluation.running.request import RunRequest
from nl2sql_assets.llm.calls import EnvErrorKind, TokenSource, Usage


class PlanTried(StrictModel):
    """One plan the engine tried for a case run, and why it failed (None: the plan that stood)."""

    plan: dict[str, Any]
    error: str | None = None


class TurnRecord(StrictModel):
    """A follow-up's earlier turn as it was played (not timed): what the engine returned, and the
    verdict result_match gave it (None where result_match did not judge the case)."""

    question: str
    result_status: str
    error_code: str | None = None
    sql: str | None = None
    row_count: int | None = None
    rows_sha256: str | None = None
    passed: bool | None = None
    reason: str | None = None


class CaseRecord(StrictModel):
    suite: str
    case_id: str
    role: str
    config: str
    mode: ModeName
    pass_index: int = 1
    expected: str
    kind: str = "answer"  # the case's kind: answer, routing or probe
    domain: str | None = None  # what per-domain rates group by: the case's domain, else its datasource(s)
    fingerprint: str | None = None  # the case definition's (question and SQL), for unique_case_count

    status: Verdict  # every applicable scorer passed
    lenient_status: Verdict | None = None  # as status, with result_match read leniently
    execution_status: Verdict | None = None  # result_match and outcome only; None for routing cases
    reason: str = ""  # the first failing scorer's reason
    scores: dict[str, Score] = Field(default_factory=dict)

    result_status: str | None = None  # the QueryResult's status
    error_code: str | None = None
    error_message: str | None = None
    policy_rule: str | None = None  # the policy rule that refused, when one did
    sql: str | None = None
    plan: dict[str, Any] | None = None
    plans_tried: list[PlanTried] = Field(default_factory=list)  # every plan, in order, with its error
    answer: str | None = None  # the written answer's summary
    answer_content: str | None = None  # and its full content
    clarification: str | None = None  # the question asked back (result status needs_clarification)
    datasources: list[str] = Field(default_factory=list)
    columns: list[str] = Field(default_factory=list)
    row_count: int | None = None
    rows_sha256: str | None = None
    source: Literal["generated", "verified"] = "generated"
    curated_match: Literal["exact", "paraphrase"] | None = None  # how the verified answer was found
    generated: CaseRecord | None = None  # the curated-off rerun of a verified answer

    tags: list[str] = Field(default_factory=list)
    difficulty: str | None = None
    models: dict[str, str] = Field(default_factory=dict)  # node -> provider/model
    usage: dict[str, Usage] = Field(default_factory=dict)  # node -> tokens
    cost_usd: float | None = None  # what every priced call cost (measured and estimated tokens)
    unknown_cost_calls: int = 0  # calls that went out and could not be priced at all
    estimated_calls: int = 0  # calls whose tokens were (partly) counted by us, not the provider
    token_source: TokenSource | None = None  # over the case run's calls (None: no call)
    #: the provider failed this case run (an outage, not the model): left out of accuracy
    env_error: EnvErrorKind | None = None
    latency_s: float = 0.0
    #: started before its config's first case run finished: it carries the one-time costs (the
    #: first call of each client, model loads such as ONNX, the first connection), so latency
    #: figures leave it out and report it apart
    warmup: bool = False
    #: the gold SQL's own execution time on the datasource (median of 3 runs): what the question
    #: costs without any engine around it (None: no gold SQL, or it could not run)
    oracle_latency_s: float | None = None
    timings: dict[str, float] = Field(default_factory=dict)
    retries: int = 0
    retrieval: dict[str, Any] | None = None
    routed: list[str] | None = None
    warmup_turns: int = 0  # a follow-up's earlier turns played first (not timed)
    #: each earlier turn of a follow-up, with its verdict (a failed one fails the case)
    turns: list[TurnRecord] = Field(default_factory=list)
    candidate_count: int = 0  # candidate plans tried (0: one plan, no selection)
    selected_candidate: int | None = None  # which one the selector chose
    first_candidate_status: Verdict | None = None  # the verdict had the first candidate answered
    candidate_extra_s: float | None = None  # seconds spent on candidates after the first

    @model_validator(mode="before")
    @classmethod
    def _faithfulness_is_its_score(cls, data: Any) -> Any:
        """Records once kept the faithfulness check beside the scores; it is the faithfulness
        score (a record that has the score keeps it as it is)."""
        if isinstance(data, dict) and "faithfulness" in data:
            data = dict(data)
            check = data.pop("faithfulness")
            scores = data.get("scores") or {}
            if check is not None and "faithfulness" not in scores:
                data["scores"] = {**scores, "faithfulness": Faithfulness.score_of(check)}
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def faithfulness(self) -> dict[str, Any] | None:
        """The faithfulness check of the written answer, as the faithfulness scorer made it (None
        when no answer was checked)."""
        detail = Faithfulness.detail_of(self.scores.get("faithfulness"))
        return None if detail is None else detail.check()


# ---------------------------------------------------------------- the run's metadata


class SuiteRef(StrictModel):
    name: str
    path: str
    digest: str  # SHA-256 of the suite file's LF bytes


class DatabaseRef(StrictModel):
    datasource_id: str
    engine: str
    schema_fingerprint: str
    tables: int = 0
    columns: int = 0
    #: why the run's login could change data on this server (superuser, a write privilege), None
    #: where it could not (every file engine: opened read-only)
    could_write: str | None = Field(default=None, exclude_if=lambda v: v is None)


class ConfigMeta(StrictModel):
    models: dict[str, str] = Field(default_factory=dict)  # node -> provider/model
    planned_cases: int = 0
    completed_cases: int = 0
    unknown_cost_calls: int = 0
    estimated_calls: int = 0
    token_source: TokenSource | None = None
    env_errors: dict[str, int] = Field(default_factory=dict)  # environment error kind -> case runs
    #: case runs the cost cap stopped in flight, at a model call that could pass it: their dollars
    #: are spent, they have no record and no verdict (neither passed nor failed)
    stopped_by_cap: int = 0


class RunStamp(StrictModel):
    """When a run happened and on which code; records copy it, never the clock at publish time."""

    started_at: datetime
    finished_at: datetime
    package_version: str
    #: the engine's code: the commit of the checkout holding the installed package ("unknown" for a
    #: wheel install or without git)
    git_commit: str = "unknown"
    git_dirty: bool | Literal["unknown"] = "unknown"
    #: the project folder's own checkout (suites, config, records), where one holds it
    project_git_commit: str = "unknown"
    project_git_dirty: bool | Literal["unknown"] = "unknown"


def summed_counts(counts: Iterable[dict[str, int]]) -> dict[str, int]:
    """Counts by kind added over several runs or shards (kinds sorted, as reports print them)."""
    out: dict[str, int] = {}
    for one in counts:
        for key, n in one.items():
            out[key] = out.get(key, 0) + n
    return dict(sorted(out.items()))


def _same_ref(a: Any, b: Any) -> bool:
    def dump(x: Any) -> Any:
        return x.model_dump() if isinstance(x, StrictModel) else x

    return dump(a) == dump(b)


def _one_database_as_list(data: Any) -> Any:
    """Accept ``database=`` (one ref or a list) as a spelling of ``databases=``."""
    if isinstance(data, dict) and "database" in data:
        data = dict(data)
        value = data.pop("database")
        if "databases" in data:
            first = (data["databases"] or [None])[0]
            if _same_ref(value, first):  # a saved report's derived field: the first of its list
                return data
            raise ValueError("database: give either database or databases, not both")
        data["databases"] = [] if value is None else value if isinstance(value, list) else [value]
    return data


class NeighbourSetRef(StrictModel):
    """One datasource's kept neighbours as a run graded on them."""

    datasource: str
    key: str  # the set's digest: the database's bytes, the gold, the settings, the versions
    kept: int
    separated: int = 0
    separable: int = 0
    possibly_equivalent: int = 0


class NeighbourRun(StrictModel):
    """What a run's neighbour-robust verdicts depend on: the settings, the generator's and the
    comparator's versions, and each datasource's set. Part of a record's series."""

    count: int
    seed: int
    candidates: int
    max_rows: int
    generator_version: int
    #: candidates the witness search tried per pass (0: none; runs before the search had none)
    witness: int = 0
    witness_version: int | None = None
    sets: list[NeighbourSetRef] = Field(default_factory=list)
    #: datasources of the run graded on the original database only: servers, whose neighbour
    #: databases are not made yet
    original_only: list[str] = Field(default_factory=list)

    def series(self) -> tuple[Any, ...]:
        """What two runs must share for their neighbour-robust verdicts to compare."""
        return (self.count, self.seed, self.candidates, self.max_rows, self.generator_version, self.witness,
                self.witness_version if self.witness else None)


class RunFacts(StrictModel):
    """What a run was, apart from its boards: shared by RunMeta (what running cases returns
    beside the records) and EvalReport (the report built from both), so the two cannot drift
    apart. ``request`` is the request exactly as it was given (None in reports made before there
    was one, and in boards merged from several stored passes it is the first pass's)."""

    request: RunRequest | None = None
    mode: ModeName
    suites: list[SuiteRef] = Field(default_factory=list)
    roles: list[str] = Field(default_factory=list)
    passes: int = Field(default=1, ge=1)
    curated: bool = False
    clarify: bool = False
    max_cost_usd: float | None = None
    spent: float = 0.0
    stopped: Stopped | None = None
    #: some case runs failed for the environment (provider outage, quota, auth...): the run's
    #: numbers are not the model's, the gate never compares it and it is not recorded unless asked
    incomplete: bool = False
    env_errors: dict[str, int] = Field(default_factory=dict)  # environment error kind -> case runs
    #: why the circuit breaker stopped the run (config, provider, status, redacted message)
    breaker: str | None = None
    skipped: int = 0
    #: case runs the mode does not make, by case kind (mode plans: routing; retrieval: probe)
    left_out: dict[str, int] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict)
    databases: list[DatabaseRef] = Field(default_factory=list)
    scorers: list[str] = Field(default_factory=list)
    run_stamp: RunStamp
    comparator_version: int = 1
    #: the final-SQL policy check's version (``policy.POLICY_CHECK_VERSION``; 1 before it was kept)
    policy_check_version: int = 1
    #: the comparator's rules (tolerance, lenient guards), as ``comparison.comparator_settings``
    #: gives them; empty in runs recorded before it was kept
    comparator: dict[str, Any] = Field(default_factory=dict)
    isolation: Isolation | None = None  # what the run kept apart from the serving engine (None: older runs)
    #: the neighbour databases every pass was also graded on (None: the original database only)
    neighbours: NeighbourRun | None = None
    #: the gold audit of the run's suites (``neighbours.audit``), made with the neighbours
    gold_audit: list[AuditFlag] = Field(default_factory=list)

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


RecordKey = tuple[str, str, str, str, int]


def record_key(record: CaseRecord) -> RecordKey:
    """A case run's identity inside one run: no two records of a run share it."""
    return (record.config, record.suite, record.case_id, record.role, record.pass_index)


class CaseRuns(StrictModel):
    """What running cases gives back: the case records and the run's metadata. A report is
    built from the two once (``reporting.build_report``); the warehouse stores them as they are.
    A run whose caller streamed its records keeps none: ``order`` holds their keys in the run's
    order instead (never stored)."""

    records: list[CaseRecord] = Field(default_factory=list)
    meta: RunMeta
    order: list[RecordKey] = Field(default_factory=list, exclude=True)
