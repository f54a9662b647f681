"""The eval runner: ask every selected case once per role, in the mode asked for, and score it.

What differs between modes (the runtimes, the settings a run records, how its case runs go out)
belongs to the mode (``running.modes``). The runner does the rest, the same for every mode: it
selects the case runs, builds the scorers, makes, prices and scores each case run a mode's loop
asks for, and keeps the records.

Every case run gets its own run scope on the engine's bus (``run.started`` carries the
case in ``context``), then an ``eval.case`` event; the run ends with ``eval.finished``.

A follow-up case plays its earlier turns first, each with the conversation so far (``turn`` in
the context names which): priced and recorded, not timed. result_match judges each against the
rows of the turn's reviewed SQL, and a failed earlier turn fails the case with its own reason;
the final turn's latency and result make the rest of the record. A run that tried candidate plans is also scored as if the
first candidate had answered (``first_candidate_status``), which candidate uplift compares.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hashlib
import json
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nl2sql_assets.config import ConfigError, ProjectConfig
from nl2sql_assets.datasources.base import DatasourceUnavailable
from nl2sql_assets.engine.events import EVAL_CASE, EVAL_FINISHED, Event, EventBus
from nl2sql_assets.engine.result import PROVIDER_ERROR, SECURITY_VIOLATION, QueryResult
from nl2sql_assets.errors import RunRefused
from nl2sql_assets.evaluation.judging.scorers import (
    EXECUTION_SCORERS,
    CaseRun,
    Score,
    Scorer,
    Verdict,
    case_status,
    score_run,
)
from nl2sql_assets.evaluation.running.heap import frozen_heap
from nl2sql_assets.evaluation.running.isolation import isolated_engine
from nl2sql_assets.evaluation.running.modes import (
    Budget,
    CaseJob,
    ConfigRun,
    Lineup,
    Mode,
    RunSetup,
    Stopped,
    get_mode,
    llm_mode,
)
from nl2sql_assets.evaluation.running.oracle_times import ORACLE_TIMES
from nl2sql_assets.evaluation.running.request import RunRequest
from nl2sql_assets.evaluation.running.results import (
    CaseRecord,
    CaseRuns,
    NeighbourRun,
    NeighbourSetRef,
    PlanTried,
    RecordKey,
    RunMeta,
    TurnRecord,
    record_key,
    summed_counts,
)
from nl2sql_assets.evaluation.running.scorers import NEIGHBOUR_SCORER, ScorerError, ScorerRegistry
from nl2sql_assets.evaluation.running.selection import (
    RoleRun,
    SelectionError,
    load_run_suites,
    role_runs,
    select_cases,
)
from nl2sql_assets.llm.calls import EnvErrorKind, combine_sources
from nl2sql_assets.llm.spend import CapReached
from nl2sql_assets.policy import GENERIC_REFUSAL, PolicyDecision
from nl2sql_assets.redact import get_logger, redact

if TYPE_CHECKING:
    from nl2sql_assets.engine.pipeline import Engine

log = get_logger(__name__)  # redacting: see nl2sql_assets.redact

ENGINE_ERROR = "ENGINE_ERROR"  # the engine raised instead of returning a result

OnCase = Callable[[str, CaseRecord, float], None]

__all__ = [
    "ENGINE_ERROR",
    "OnCase",
    "RunRefused",
    "SelectionError",
    "arun_cases",
    "build_case_record",
    "rows_sha256",
    "run_cases",
]


# ---------------------------------------------------------------- small pure helpers


def rows_sha256(rows: list[list[Any]] | None) -> str | None:
    """SHA-256 of the rows' canonical JSON, so passes can be compared without keeping rows."""
    if rows is None:
        return None
    blob = json.dumps(rows, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _probe_result(rr: RoleRun, datasource: str, decision: PolicyDecision, seconds: float) -> QueryResult:
    """What a probe's role gets: the generic refusal when the check refuses (with the rule that
    fired), else an allowed statement (never executed: a probe asks the policy only)."""
    common: dict[str, Any] = {"run_id": "", "question": rr.case.question, "role": rr.role, "sql": rr.case.sql,
                              "datasources": [datasource], "timings": {"policy": seconds}}
    if decision.allowed:
        return QueryResult(status="success", **common)
    return QueryResult(status="error", error_code=SECURITY_VIOLATION, error_message=GENERIC_REFUSAL,
                       policy_rule=decision.rule, **common)


def env_error_of(result: QueryResult) -> EnvErrorKind | None:
    """The environment error kind of a case run the provider or the datasource's server failed
    (None: neither did)."""
    if result.error_code == DatasourceUnavailable.code:
        return "database"
    if result.error_code != PROVIDER_ERROR:
        return None
    return next((c.error_kind for c in reversed(result.calls) if c.error_kind), "transport")


def _error_result(rr: RoleRun, exc: BaseException) -> QueryResult:
    return QueryResult(
        run_id="",
        question=rr.case.question,
        role=rr.role,
        status="error",
        error_code=ENGINE_ERROR,
        error_message=redact(f"{type(exc).__name__}: {exc}"),
    )


def build_case_record(
    *,
    rr: RoleRun,
    config_name: str,
    mode: Mode,
    pass_index: int,
    result: QueryResult,
    scores: dict[str, Score],
    latency_s: float,
    models: dict[str, str],
    cost_usd: float | None,
    unknown_cost_calls: int,
    engine_error: bool = False,
    warmup_turns: int = 0,
    first_candidate_status: Verdict | None = None,
    turns: Sequence[QueryResult] = (),
) -> CaseRecord:
    """One case run's compact verdict: statuses from the scores, and what the run produced."""
    case = rr.case
    status, reason = case_status(scores)
    lenient, _ = case_status(scores, lenient=True)
    execution: Verdict | None = None
    if case.kind == "answer" and mode.executes:  # routing cases, probes and modes that execute nothing have none
        execution, _ = case_status(scores, only=EXECUTION_SCORERS)
    if engine_error:
        status = lenient = "error"
        execution = None if execution is None else "error"
        reason = f"engine: {result.error_message}"
    rows = result.rows
    judged = scores.get("result_match")
    verdicts = {t["turn"]: t for t in (judged.detail.get("turns") or [])} if judged is not None else {}
    turn_records = [
        TurnRecord(question=earlier.question, result_status=turn.status, error_code=turn.error_code, sql=turn.sql,
                   row_count=len(turn.rows) if turn.rows is not None else None, rows_sha256=rows_sha256(turn.rows),
                   passed=verdicts.get(n, {}).get("passed"), reason=verdicts.get(n, {}).get("reason"))
        for n, (earlier, turn) in enumerate(zip(case.turns, turns, strict=False), start=1)]
    return CaseRecord(
        suite=rr.suite,
        case_id=case.id,
        role=rr.role,
        config=config_name,
        mode=mode.name,
        pass_index=pass_index,
        expected=rr.expected,
        kind=case.kind,
        domain=case.domain_name,
        fingerprint=case.fingerprint(),
        status=status,
        lenient_status=lenient,
        execution_status=execution,
        reason=reason,
        scores=scores,
        result_status=result.status,
        error_code=result.error_code,
        error_message=result.error_message,
        policy_rule=result.policy_rule,
        sql=result.sql,
        plan=result.plan,
        plans_tried=[PlanTried(plan=plan, error=result.plan_errors[i] if i < len(result.plan_errors) else
                               (None if result.status == "success" else result.error_message))
                     for i, plan in enumerate(result.plans)],
        answer=result.answer.summary if result.answer is not None else None,
        answer_content=result.answer.content if result.answer is not None else None,
        clarification=result.clarification,
        datasources=list(result.datasources),
        columns=list(result.columns),
        row_count=len(rows) if rows is not None else None,
        rows_sha256=rows_sha256(rows),
        source=result.source,
        curated_match=result.curated_match,
        tags=list(case.tags),
        difficulty=case.difficulty_label,
        models=dict(models),
        usage=result.usage,
        cost_usd=cost_usd,
        unknown_cost_calls=unknown_cost_calls,
        estimated_calls=sum(1 for c in result.calls if c.token_source in ("estimated", "mixed")),
        token_source=combine_sources(c.token_source for c in result.calls),
        env_error=env_error_of(result),
        latency_s=latency_s,
        timings=dict(result.timings),
        retries=result.retries,
        retrieval=result.retrieval,
        routed=result.routing,
        warmup_turns=warmup_turns,
        turns=turn_records,
        candidate_count=len(result.candidates),
        selected_candidate=result.selected_candidate,
        first_candidate_status=first_candidate_status,
        candidate_extra_s=sum(c.seconds for c in result.candidates[1:]) if len(result.candidates) > 1 else None,
    )


def first_candidate_result(result: QueryResult) -> QueryResult | None:
    """What the run would have returned had the first candidate plan answered (None: no selection)."""
    if len(result.candidates) < 2:
        return None
    first = result.candidates[0]
    if first.result_set is None:
        return result.model_copy(update={"status": "error", "error_code": first.error_code,
                                         "error_message": first.error_message, "result_sets": [],
                                         "sql": first.sql, "plan": first.plan})
    return result.model_copy(update={"result_sets": [first.result_set], "sql": first.sql, "plan": first.plan})


def provider_label(model: str) -> str:
    """Who failed, for the breaker's message: an engine served over HTTP is described as
    ``http:<url>`` and named by its address; a model by litellm's provider prefix and its name."""
    if model.startswith("http:"):
        return f"engine at {model.removeprefix('http:')}"
    return f"provider {model.split('/', 1)[0]} ({model})"


# ---------------------------------------------------------------- the case runs a mode's loop asks for


class _Cases:
    """The runner's side of a mode's loop (``CaseLoop``): each job answered or retrieved, priced
    and scored into a record, held until the loop finishes it, then counted and announced."""

    def __init__(self, mode: Mode, config: ProjectConfig, lineup: Lineup, scorers: dict[str, Scorer],
                 bus: EventBus, jobs: Sequence[CaseJob], on_case: OnCase | None, budget: Budget | None,
                 candidates: int | None = None, registry: Any = None, keep_records: bool = True) -> None:
        self.mode = mode
        self.candidates = candidates  # forced plans per question (the request's), else None
        self.config = config
        self.lineup = lineup
        self.budget = budget
        self.scorers = scorers
        self.bus = bus
        self.on_case = on_case
        # each job's record, or (``keep_records=False``: the caller streams them) its key only
        self.records: list[CaseRecord | RecordKey | None] = [None] * len(jobs)
        self.keep_records = keep_records
        self.first_config = next(iter(lineup.configs), None)
        self.scored = self.passed = self.passed_generated = 0  # the first config's, for eval.finished
        self.spent = 0.0
        self.broken: str | None = None  # the circuit breaker's message once it tripped
        self._env_streak: dict[str, int] = {}  # config -> case runs in a row the provider failed
        self._first_done: dict[str, float] = {}  # config -> when its first case run finished
        self._oracle_s: dict[str, float | None] = {}  # suite:case -> the gold SQL's median time
        self._turn_rows: dict[str, list[list[list[Any]] | None]] = {}  # suite:case -> each earlier turn's rows
        self._registry = registry
        self._max_env_errors = config.evals_config.max_consecutive_env_errors
        self._done: dict[int, tuple[CaseRecord, float]] = {}
        self._warned_unknown = False
        self._own_policy: dict[tuple[int, str], Any] = {}  # (runtime, case) -> the runtime under the case's policy

    # ------------------------------------------------------------ what a loop calls

    async def answer(self, job: CaseJob) -> float:
        """Ask, price and score one case run; a verified answer is asked again on the generated
        path when the config has one. A policy probe goes to the policy check alone (no model
        call, nothing spent). Returns the dollars it spent (reruns included)."""
        cfg = self.lineup.configs[job.config]
        started = time.perf_counter()
        if job.rr.case.kind == "probe":
            cost = await self._probe(cfg, job)
            self._mark_warmup(job, started)
            return cost
        result, latency, failed, warmup = await self._ask(cfg.runtime, job)
        cost, unknown = self._price(result, cfg)
        for turn in warmup:  # warm-up turns are paid for like any call
            w_cost, w_unknown = self._price(turn, cfg)
            cost, unknown = cost + w_cost, unknown + w_unknown
        record = self._record(job, cfg, result, latency, failed, cost, unknown, warmup=warmup,
                              turn_gold=await self._turn_gold(job))
        total = cost
        if result.source == "verified" and cfg.generated_runtime is not None:
            g_result, g_latency, g_failed, g_warmup = await self._ask(cfg.generated_runtime, job)
            g_cost, g_unknown = self._price(g_result, cfg)
            for turn in g_warmup:
                w_cost, w_unknown = self._price(turn, cfg)
                g_cost, g_unknown = g_cost + w_cost, g_unknown + w_unknown
            generated = self._record(job, cfg, g_result, g_latency, g_failed, g_cost, g_unknown, warmup=g_warmup,
                                     turn_gold=await self._turn_gold(job))
            record = record.model_copy(update={"generated": generated})
            total += g_cost
        oracle = await self._oracle(job)
        self._done[job.index] = (record.model_copy(update={"oracle_latency_s": oracle}), total)
        self._mark_warmup(job, started)
        return total

    async def retrieve(self, job: CaseJob) -> float:
        """Route and retrieve one case run (no model call, nothing spent) and score it."""
        cfg = self.lineup.configs[job.config]
        rr = job.rr
        # A routing case says where a question goes, not what it needs: nothing to retrieve.
        datasource = rr.case.datasources[0] if rr.case.kind != "routing" else None
        started = time.perf_counter()
        first = started
        try:
            result = await cfg.runtime.aretrieve(rr.case.question, rr.role, datasource=datasource,
                                                 context=self._context(job))
            failed = False
        except Exception as exc:  # a broken index or datasource must not sink the run
            log.exception("case %s (%s) raised in retrieval", rr.case.id, rr.role)
            result, failed = _error_result(rr, exc), True
        latency = time.perf_counter() - started
        self._done[job.index] = (self._record(job, cfg, result, latency, failed, 0.0, 0), 0.0)
        self._mark_warmup(job, first)
        return 0.0

    def finish(self, job: CaseJob) -> None:
        """Count a case run that was answered or retrieved: its record, the event, the callback."""
        record, cost = self._done.pop(job.index)
        self.count(job, record, cost)

    def price_call(self, job: CaseJob, call: Any) -> float:
        """One model call's dollars, priced as the case's record will price it."""
        from nl2sql_assets.llm.prices import price_calls

        return price_calls([call], self.lineup.configs[job.config].llm, config=job.config)[0]

    def stopped_by_cap(self, job: CaseJob, spent: float) -> None:
        """A case run the cap stopped in flight: its dollars are spent, it has no record or verdict."""
        self._done.pop(job.index, None)
        cfg = self.lineup.configs[job.config]
        cfg.stopped_by_cap += 1
        self.spent += spent

    def count(self, job: CaseJob, record: CaseRecord, cost: float) -> None:
        """Count a finished case run (here, or in a worker process: ``running.shards``)."""
        cfg = self.lineup.configs[job.config]
        self.records[job.index] = record if self.keep_records else record_key(record)
        if cfg.name == self.first_config and record.status != "skip" and record.env_error is None:
            # An environment error is an outage, not a verdict on the model: out of the denominator.
            self.scored += 1
            self.passed += record.status == "pass"
            self.passed_generated += (record.generated or record).status == "pass"
        cfg.completed += 1
        self.spent += cost
        self._watch_environment(cfg, record)
        self.bus.publish(
            Event(
                EVAL_CASE,
                None,
                {
                    "suite": job.rr.suite,
                    "case": job.rr.case.id,
                    "role": job.rr.role,
                    "config": cfg.name,
                    "pass": job.pass_index,
                    "passed": record.status == "pass",
                    "status": record.status,
                    "source": record.source,
                    "scores": {name: score.passed for name, score in record.scores.items()},
                    "cost_usd": record.cost_usd,
                },
            )
        )
        if self.on_case is not None:
            self.on_case(cfg.name, record, self.spent)

    def _watch_environment(self, cfg: ConfigRun, record: CaseRecord) -> None:
        """Count a case run the provider failed; trip the circuit breaker after
        ``max_consecutive_env_errors`` of them in a row for one config, naming what failed."""
        kind = record.env_error
        if kind is None:
            self._env_streak[cfg.name] = 0
            return
        cfg.env_errors[kind] = cfg.env_errors.get(kind, 0) + 1
        streak = self._env_streak[cfg.name] = self._env_streak.get(cfg.name, 0) + 1
        if streak < self._max_env_errors or self.broken is not None:
            return
        if kind == "database":  # the datasource's server, whose message names it (never its password)
            self.broken = redact(f"stopped after {streak} case runs in a row failed for the environment, not the "
                                 f"model: config {cfg.name!r}: {record.error_message}")
            log.error("%s", self.broken)
            return
        node = (record.error_message or "").split(":", 1)[0]  # the client's message starts with the node
        try:
            settings = cfg.llm.for_node(node)
            model, where = settings.model, f" at {settings.api_base}" if settings.api_base else ""
        except ConfigError:
            model, where = next(iter(record.models.values()), "?"), ""
        self.broken = redact(
            f"stopped after {streak} case runs in a row failed for the environment, not the model: "
            f"config {cfg.name!r}, {provider_label(model)}{where}: {record.error_message}")
        log.error("%s", self.broken)

    def _mark_warmup(self, job: CaseJob, started: float) -> None:
        """Flag the job's record as a warm-up run when it started before any case run of its
        config had finished (with several at once, all of the first wave share the warm-up)."""
        first = self._first_done.get(job.config)
        if first is None:
            self._first_done[job.config] = time.perf_counter()
        elif started >= first:
            return
        record, cost = self._done[job.index]
        self._done[job.index] = (record.model_copy(update={"warmup": True}), cost)

    async def _oracle(self, job: CaseJob) -> float | None:
        """The gold SQL's execution time on the case's datasource, median of 3 (once per case, and
        once per process for an unchanged database file: ``ORACLE_TIMES``)."""
        case = job.rr.case
        if case.kind != "answer" or not case.sql or not self.mode.executes or len(case.datasources) != 1:
            return None
        key = f"{job.rr.suite}:{case.id}"
        if key not in self._oracle_s:
            self._oracle_s[key] = await asyncio.to_thread(self._time_gold, case.datasources[0], case.sql)
        return self._oracle_s[key]

    def _time_gold(self, datasource: str, sql: str) -> float | None:
        try:
            adapter = self._registry.get(datasource)
            key = ORACLE_TIMES.key(adapter, sql)
            known = ORACLE_TIMES.get(key) if key is not None else None
            if known is not None:
                return known
            times = []
            for _ in range(3):
                started = time.perf_counter()
                adapter.execute(sql, timeout_s=adapter.timeout_s)
                times.append(time.perf_counter() - started)
        except Exception:  # the case's rows are checked elsewhere; no figure is better than a wrong one
            log.debug("gold SQL of %s could not be timed", datasource, exc_info=True)
            return None
        seconds = statistics.median(times)
        if key is not None:
            ORACLE_TIMES.put(key, seconds)
        return seconds

    def warn_unpriced(self) -> None:
        """Say, once the run is over, exactly how many calls were estimated or not priced."""
        for cfg in self.lineup.configs.values():
            if cfg.engine:
                if cfg.unknown_cost_calls:
                    log.warning("config %r is an outside engine: %d of its replies carried no cost, so what it cost is "
                                "unknown (an engine's cost is counted only from what it reports: cost_usd in each "
                                "reply, and reports_cost: true in its entry)", cfg.name, cfg.unknown_cost_calls)
                continue
            if cfg.estimated_calls or cfg.unknown_cost_calls:
                log.warning("config %r: %d model call(s) reported no (or partial) token counts and were counted "
                            "with the model's tokenizer (cost flagged estimated); %d could not be priced at all",
                            cfg.name, cfg.estimated_calls, cfg.unknown_cost_calls)

    # ------------------------------------------------------------ one case run

    @staticmethod
    def _context(job: CaseJob, turn: int | None = None) -> dict[str, Any]:
        rr = job.rr
        context: dict[str, Any] = {"case_id": rr.case.id, "suite": rr.suite, "pass": job.pass_index,
                                   "config": job.config, "role": rr.role}
        if rr.case.turns:
            context["turn"] = len(rr.case.turns) if turn is None else turn
        return context

    def _runtime(self, runtime: Any, job: CaseJob) -> Any:
        """The runtime a case is asked on: ``runtime``, or a runtime derived from it under the
        case's own policy and candidate count (made once per case and runtime)."""
        case = job.rr.case
        setting = runtime.options.candidates or runtime.config.settings.candidates
        candidates = self.candidates or case.candidate_count(setting)
        if case.policy is None and candidates == setting:
            return runtime
        key = (id(runtime), f"{job.rr.suite}:{case.id}")
        own = self._own_policy.get(key)
        if own is None:
            changes: dict[str, Any] = {"candidates": candidates}
            if case.policy is not None:
                changes["policies"] = case.policy.policies(self.config.policies)
            own = runtime.derive(**changes)
            self._own_policy[key] = own
        return own

    async def _probe(self, cfg: ConfigRun, job: CaseJob) -> float:
        """Send a probe's SQL to the final-SQL policy check the runtime runs before executing,
        under the role and the case's policy, and score the decision."""
        rr = job.rr
        runtime = self._runtime(cfg.runtime, job)
        datasource = rr.case.datasources[0]
        assert rr.case.sql is not None, "a probe has sql (the suite model says so)"
        started = time.perf_counter()
        decision: PolicyDecision | None = None
        try:
            decision = await asyncio.to_thread(runtime.check_policy, rr.case.sql, rr.role, datasource)
            result, failed = _probe_result(rr, datasource, decision, time.perf_counter() - started), False
        except Exception as exc:  # an unknown datasource, a schema that cannot be read: this probe only
            log.exception("probe %s (%s) could not be checked", rr.case.id, rr.role)
            result, failed = _error_result(rr, exc), True
        latency = time.perf_counter() - started
        self._done[job.index] = (self._record(job, cfg, result, latency, failed, 0.0, 0, decision), 0.0)
        return 0.0

    async def _ask(self, runtime: Any, job: CaseJob) -> tuple[QueryResult, float, bool, list[QueryResult]]:
        """The final turn's result, its latency and whether the engine raised, and the results of
        the warm-up turns played before it (a follow-up's earlier turns; not timed)."""
        from nl2sql_assets.engine.conversation import Turn

        rr = job.rr
        runtime = self._runtime(runtime, job)
        conversation: list[Turn] = []
        warmup: list[QueryResult] = []
        try:
            for index, earlier in enumerate(rr.case.turns):
                turn = await runtime.aask(earlier.question, rr.role, context=self._context(job, index),
                                          conversation=list(conversation))
                warmup.append(turn)
                conversation.append(Turn(question=earlier.question, sql=turn.sql,
                                         answer=turn.answer.summary if turn.answer is not None else None))
        except CapReached:
            raise  # the cost cap stops the case: the loop counts it, no verdict
        except Exception as exc:
            log.exception("case %s (%s) raised in a warm-up turn", rr.case.id, rr.role)
            return _error_result(rr, exc), 0.0, True, warmup
        started = time.perf_counter()
        try:
            result = await runtime.aask(rr.case.question, rr.role, context=self._context(job),
                                        conversation=conversation)
            failed = False
        except CapReached:
            raise
        except Exception as exc:  # the engine should return errors; a raise must not sink the run
            log.exception("case %s (%s) raised in the engine", rr.case.id, rr.role)
            result, failed = _error_result(rr, exc), True
        return result, time.perf_counter() - started, failed, warmup

    def _price(self, result: QueryResult, cfg: ConfigRun) -> tuple[float, int]:
        """(USD of every priced call, calls that could not be priced); the config's tallies grow."""
        from nl2sql_assets.llm.prices import price_calls

        cost, unknown = price_calls(result.calls, cfg.llm, config=cfg.name)
        cfg.unknown_cost_calls += unknown
        cfg.estimated_calls += sum(1 for c in result.calls if c.token_source in ("estimated", "mixed"))
        cfg.token_sources.update(c.token_source for c in result.calls if c.token_source is not None)
        return cost, unknown

    async def _turn_gold(self, job: CaseJob) -> list[list[list[Any]] | None]:
        """The rows of each earlier turn's reviewed SQL on the case's datasource (None for a turn
        without SQL, or whose SQL fails or is cut: that turn is judged by its status alone); once
        per case."""
        case = job.rr.case
        if not case.turns or self._registry is None or not self.mode.executes or len(case.datasources) != 1:
            return [None] * len(case.turns)
        key = f"{job.rr.suite}:{case.id}"
        if key not in self._turn_rows:
            self._turn_rows[key] = await asyncio.to_thread(self._run_turns, case.datasources[0],
                                                           [t.sql for t in case.turns])
        return self._turn_rows[key]

    def _run_turns(self, datasource: str, sqls: list[str | None]) -> list[list[list[Any]] | None]:
        from nl2sql_assets.datasources.base import DatasourceError

        out: list[list[list[Any]] | None] = []
        for sql in sqls:
            rows = None
            if sql:
                try:
                    found = self._registry.get(datasource).execute(sql)
                    rows = None if found.truncated else found.rows
                except DatasourceError:
                    log.warning("the reviewed SQL of an earlier turn failed on %s: that turn is judged by its "
                                "status alone", datasource)
            out.append(rows)
        return out

    def _scores(self, job: CaseJob, result: QueryResult, policy: PolicyDecision | None = None,
                warmup: Sequence[QueryResult] = (), turn_gold: Sequence[list[list[Any]] | None] = ()
                ) -> dict[str, Score]:
        from nl2sql_assets.evaluation.judging.scorers import TurnRun

        case = job.rr.case
        turns = [TurnRun(question=earlier.question, result=turn,
                         gold_rows=turn_gold[n] if n < len(turn_gold) else None)
                 for n, (earlier, turn) in enumerate(zip(case.turns, warmup, strict=False))]
        if len(turns) < len(case.turns):  # an earlier turn raised: the case is an engine error, judged as one
            turns = []
        case_run = CaseRun(
            case=job.rr.case,
            role=job.rr.role,
            mode=self.mode.name,
            result=result,
            rows=result.rows,
            columns=result.columns,
            retrieval=result.retrieval,
            routed=result.routing,
            policy=policy,
            turns=turns,
        )
        return score_run(self.scorers, case_run)

    def _record(self, job: CaseJob, cfg: ConfigRun, result: QueryResult, latency: float, failed: bool,
                cost: float | None, unknown: int, policy: PolicyDecision | None = None,
                warmup: Sequence[QueryResult] = (), turn_gold: Sequence[list[list[Any]] | None] = ()
                ) -> CaseRecord:
        scores = self._scores(job, result, policy, warmup, turn_gold)
        first = first_candidate_result(result)
        first_status = (case_status(self._scores(job, first, None, warmup, turn_gold))[0]
                        if first is not None and not failed else None)
        return build_case_record(
            rr=job.rr, config_name=cfg.name, mode=self.mode, pass_index=job.pass_index, result=result,
            scores=scores, latency_s=latency, models=cfg.models, cost_usd=cost, unknown_cost_calls=unknown,
            engine_error=failed, warmup_turns=len(warmup), first_candidate_status=first_status, turns=warmup,
        )


# ---------------------------------------------------------------- setting a run up


def _check_roles(config: ProjectConfig, runs: list[RoleRun]) -> None:
    for rr in runs:
        roles = rr.case.policy.roles if rr.case.policy is not None else config.policies.roles
        if roles and rr.role not in roles:
            raise SelectionError(
                f"suite {rr.suite!r}, case {rr.case.id!r}: outcome names role {rr.role!r}, "
                f"which the policy does not define (roles: {sorted(roles)})"
            )


def _databases(registry: Any, runs: list[RoleRun],
               loaded: Sequence[tuple[str, Path, Any]] = ()) -> list[dict[str, Any]]:
    """Identity of every datasource the selected cases name (first seen first)."""
    ids = list(dict.fromkeys(ds for rr in runs for ds in rr.case.datasources))
    out = []
    for ds_id in ids:
        if ds_id not in registry:
            case = next(rr for rr in runs if ds_id in rr.case.datasources)
            raise SelectionError(
                f"{_where(case, loaded)}: datasource {ds_id!r} is not configured in nl2sql.yaml "
                f"(known: {', '.join(registry.ids)}): fix the case's datasources, or add the datasource "
                "under datasources: in nl2sql.yaml"
            )
        snap = registry.snapshot(ds_id)
        could_write = getattr(registry.get(ds_id), "could_write", lambda: None)()  # an adapter of a test may lack it
        if could_write is not None:
            log.warning("datasource %r: %s: this evaluation's login could change data; every statement runs in "
                        "a read-only transaction, but a read-only role is the layer that holds (README, "
                        "'A read-only role')", ds_id, could_write)
        out.append(
            {
                "datasource_id": ds_id,
                "engine": snap.engine,
                "schema_fingerprint": snap.fingerprint(),
                "tables": len(snap.tables),
                "columns": snap.column_count,
                "could_write": could_write,
            }
        )
    return out


def _where(rr: RoleRun, loaded: Sequence[tuple[str, Path, Any]]) -> str:
    """``FILE, line N: case ID`` for a case of a loaded suite (its datasources' line), else by name."""
    from nl2sql_assets.evaluation.suites.loader import case_location

    for name, path, suite in loaded:
        if name == rr.suite:
            if suite.path is None:
                suite = suite.model_copy()
                suite._path = Path(path)
            return case_location(suite, rr.case.id, "datasources", name)
    return f"suite {rr.suite!r}, case {rr.case.id!r}"


def _kinds(runs: list[RoleRun], mode: Mode, *, allow_empty: bool = False) -> tuple[list[RoleRun], dict[str, int]]:
    """The role runs of the kinds of case the mode runs, and how many of each other kind it left out."""
    kept = [rr for rr in runs if rr.case.kind in mode.kinds]
    left: dict[str, int] = {}
    for rr in runs:
        if rr.case.kind not in mode.kinds:
            left[rr.case.kind] = left.get(rr.case.kind, 0) + 1
    if runs and not kept and not allow_empty:
        raise SelectionError(f"mode {mode.name} runs {', '.join(sorted(mode.kinds))} cases; the selection holds "
                             f"only {', '.join(f'{n} {kind} case run(s)' for kind, n in sorted(left.items()))}")
    return kept, left


def _jobs(runs: list[RoleRun], pass_list: list[int], config_names: list[str]) -> list[CaseJob]:
    """Pass by pass, case by case; the configs of a case side by side, so a run the cap
    stops has asked every config the same cases."""
    jobs: list[CaseJob] = []
    for p in pass_list:
        for rr in runs:
            for name in config_names:
                jobs.append(CaseJob(len(jobs), rr, p, name))
    return jobs


def _shards(request: RunRequest, mode: Mode, runs: list[RoleRun], passes: int, *,
            scorers: dict[str, Scorer], budget: Budget | None) -> tuple[int, str]:
    """How many shards the run's case runs take, and how their workers start (``running.shards``).
    Decided before the run sets anything up, so that a forked worker builds its engine and gold
    server while this process builds its own."""
    from nl2sql_assets.evaluation.running import shards

    case_ids = shards.runnable_case_ids(runs)
    if request.shard is not None:
        return request.shard[1], "spawn"
    method = shards.start_method()
    minimum = shards.MIN_JOBS_PER_FORKED_SHARD if method == "fork" else shards.MIN_JOBS_PER_SHARD
    # A mode that shards spends nothing and runs one config: a job per role run and pass.
    count = shards.shard_count(request, mode, len(runs) * passes, custom_scorers=not shards.portable(scorers),
                               budget=budget, min_jobs=minimum)
    return min(len(case_ids), count), method


async def _execute(request: RunRequest, mode: Mode, cases: _Cases, jobs: list[CaseJob], count: int,
                   workers: Any) -> Stopped | None:
    """Make the case runs: all here, or shard 0 here and the others in the worker processes
    already started (``running.shards``; records counted here as they come, in the same order)."""
    from nl2sql_assets.evaluation.running import shards

    if count <= 1:
        return await mode.execute(cases, jobs)
    plan = shards.deal(shards.runnable_case_ids([j.rr for j in jobs]), count)  # the workers deal the same
    if request.shard is not None:  # a worker: its own shard only
        return await mode.execute(cases, shards.jobs_of(plan[request.shard[0]], jobs))
    assert workers is not None
    collector = asyncio.create_task(workers.collect(cases.count, jobs))
    try:
        stopped = await mode.execute(cases, shards.jobs_of(plan[0], jobs))
        await collector
    finally:
        collector.cancel()
    for name, n in workers.unknown_cost_calls.items():
        cases.lineup.configs[name].unknown_cost_calls += n
    return stopped


def _neighbours(request: RunRequest, mode: Mode, config: ProjectConfig, loaded: list[tuple[str, Path, Any]],
                runs: list[RoleRun]) -> tuple[NeighbourRun | None, dict[str, dict[str, Any]], list[Any]]:
    """A run with neighbour settings (the request's, else evals.yaml's) in a mode that executes
    SQL: each datasource of its answer cases gets its kept set (built once, then read back),
    which neighbour_match grades on, and its suites' gold is audited on them (the flags of the
    selected cases; a shard's worker leaves that to the run). The sets are distilled over the gold
    of every suite the project runs, so a run of one suite grades on the neighbours a run of all
    of them does."""
    settings = request.neighbour_settings(config)
    if settings is None or not mode.executes:
        return None, {}, []
    from nl2sql_assets.evaluation.neighbours import GENERATOR_VERSION
    from nl2sql_assets.evaluation.neighbours.audit import audit_suite
    from nl2sql_assets.evaluation.neighbours.store import original_only, project_sets, project_suites
    from nl2sql_assets.paths import neighbours_dir

    wanted = {rr.case.datasources[0] for rr in runs if rr.case.kind == "answer" and len(rr.case.datasources) == 1}
    sets = project_sets(config, project_suites(config, [(name, suite) for name, _, suite in loaded]), settings,
                        neighbours_dir(config.root), datasources=wanted)
    from nl2sql_assets.evaluation.neighbours.witness import WITNESS_VERSION

    run = NeighbourRun(
        **settings.identity(), generator_version=GENERATOR_VERSION, witness_version=WITNESS_VERSION,
        sets=[NeighbourSetRef(datasource=ds, key=kept.manifest.key, kept=len(kept.manifest.kept),
                              separated=kept.manifest.separated, separable=kept.manifest.separable,
                              possibly_equivalent=kept.manifest.possibly_equivalent)
              for ds, kept in sorted(sets.items())],
        original_only=original_only(config, wanted))
    audit: list[Any] = []
    if request.shard is None:
        selected = {(rr.suite, rr.case.id) for rr in runs}
        for name, _, suite in loaded:
            flags = audit_suite(config, name, suite, settings, sets=sets).flags
            audit += [f for f in flags if (name, f.case) in selected]
    return run, {NEIGHBOUR_SCORER: {"sets": {ds: str(kept.home) for ds, kept in sets.items()},
                                     "sources": {ds: str(kept.source) for ds, kept in sets.items() if kept.source},
                                     "witness": settings.witness}}, audit


# ---------------------------------------------------------------- the entry points


async def arun_cases(request: RunRequest, engine: Engine, *, scorers: ScorerRegistry | None = None,
                     on_case: OnCase | None = None, budget: Budget | None = None,
                     index_folder: Path | None = None, keep_records: bool = True) -> CaseRuns:
    """``run_cases`` on the running event loop."""
    from nl2sql_assets.evaluation.judging import COMPARATOR_VERSION, comparator_settings
    from nl2sql_assets.evaluation.suites import suite_digest
    from nl2sql_assets.paths import git_info
    from nl2sql_assets.policy import POLICY_CHECK_VERSION
    from nl2sql_assets.version import __version__

    started_at = datetime.now(UTC)
    mode = get_mode(request.mode)
    config = engine.config
    evals = config.evals_config

    # What to run.
    loaded = load_run_suites(config, request.suites)
    selected = select_cases([(name, suite) for name, _, suite in loaded], request.cases)
    if not selected:
        raise SelectionError(f"no approved case in suite(s) {[name for name, _, _ in loaded]}")
    runs, skipped = role_runs(selected, request.roles, clarify=request.asks_clarify(config))
    runs, left_out = _kinds(runs, mode, allow_empty=request.allow_empty)
    chosen = mode.select(runs)
    if runs and not chosen and not request.allow_empty:
        raise SelectionError(f"mode {mode.name}: {mode.nothing_selected}")
    runs = chosen
    _check_roles(config, runs)
    pass_list = (sorted(set(request.pass_numbers)) if request.pass_numbers
                 else list(range(1, (request.passes if request.passes is not None else evals.passes) + 1)))

    scorer_names = list(request.scorers) if request.scorers is not None else list(evals.scorers)
    databases = _databases(engine.registry, runs, loaded)  # a missing or damaged database is named here first
    neighbours, scorer_configs, audit = _neighbours(request, mode, config, loaded, runs)
    if neighbours is not None and NEIGHBOUR_SCORER not in scorer_names:
        scorer_names.append(NEIGHBOUR_SCORER)
    try:
        built = (scorers or ScorerRegistry.default()).build(scorer_names, mode.name, scorer_configs,
                                                             project=config)
    except ScorerError as exc:
        if request.scorers is not None or evals.source is None:
            raise
        raise ScorerError(f"{evals.source}: scorers: {exc}") from None  # the names came from that file

    # The mode sets its runtimes up (all derived from the engine, on its datasources and bus).
    if request.llm is not None and not mode.takes_llm:
        raise RunRefused(f"llm= is for mode {llm_mode().name}; {mode.no_llm}")
    if request.engines is not None and not mode.takes_llm:
        raise RunRefused(f"engines are asked in mode {llm_mode().name}; mode {mode.name} runs the built-in engine")
    from nl2sql_assets.evaluation.running import shards

    count, start = _shards(request, mode, runs, len(pass_list), scorers=built, budget=budget)
    with (shards.started(config, request, count, run_shard_worker, start) if request.shard is None
          else contextlib.nullcontext()) as workers, \
            isolated_engine(engine, index_folder) as (run_engine, isolation):
        setup = RunSetup(config=config, engine=run_engine, runs=runs, llm=request.llm, curated=request.curated,
                         max_cost_usd=request.max_cost_usd, engines=request.engines)
        with mode.lineup(setup) as lineup:
            jobs = _jobs(runs, pass_list, list(lineup.configs))
            for job in jobs:
                lineup.configs[job.config].planned += 1
            cases = _Cases(mode, config, lineup, built, engine.bus, jobs, on_case, budget, request.candidates,
                           run_engine.registry, keep_records=keep_records)
            try:
                stopped = await _execute(request, mode, cases, jobs, count, workers)
            finally:
                for scorer in built.values():  # a scorer holding connections (neighbour_match) lets them go
                    close = getattr(scorer, "close", None)
                    if callable(close):
                        close()
            if cases.broken is not None:
                stopped = "env_errors"
            cases.warn_unpriced()

    records = [r for r in cases.records if isinstance(r, CaseRecord)]
    order = [r for r in cases.records if isinstance(r, tuple)]
    # Spec 000: the engine's commit, found from the installed package (walking up to its .git), so a
    # run from a demo folder of an editable install still names the code that ran; the project
    # folder's own commit is kept beside it.
    git_commit, git_dirty = git_info()
    project_commit, project_dirty = git_info(config.root)
    meta = RunMeta.model_validate({
        "request": request,
        "mode": mode.name,
        "suites": [{"name": name, "path": str(path), "digest": suite_digest(path)} for name, path, _ in loaded],
        "roles": sorted({rr.role for rr in runs}),
        "passes": len(pass_list),
        "curated": lineup.curated,
        "clarify": request.asks_clarify(config),
        "max_cost_usd": lineup.max_cost_usd,
        "spent": cases.spent,
        "stopped": stopped,
        "incomplete": any(c.env_errors for c in lineup.configs.values()),
        "env_errors": summed_counts(c.env_errors for c in lineup.configs.values()),
        "breaker": cases.broken,
        "skipped": skipped * len(pass_list),
        "left_out": {kind: n * len(pass_list) for kind, n in left_out.items()},
        # How the case runs were made (shards.LAYOUT_SETTINGS): their latencies depend on it.
        "settings": {**lineup.settings, "pass_numbers": pass_list, "processes": count,
                     **({"worker_start": start} if count > 1 and request.shard is None else {})},
        "databases": databases,
        "configs": {
            name: {
                "models": c.models,
                "planned_cases": c.planned,
                "completed_cases": c.completed,
                "unknown_cost_calls": c.unknown_cost_calls,
                "estimated_calls": c.estimated_calls,
                "stopped_by_cap": c.stopped_by_cap,
                "token_source": combine_sources(c.token_sources),
                "env_errors": dict(sorted(c.env_errors.items())),
            }
            for name, c in lineup.configs.items()
        },
        "scorers": list(built),
        "run_stamp": {
            "started_at": started_at,
            "finished_at": datetime.now(UTC),
            "package_version": __version__,
            "git_commit": git_commit,
            "git_dirty": git_dirty,
            "project_git_commit": project_commit,
            "project_git_dirty": project_dirty,
        },
        "comparator_version": COMPARATOR_VERSION,
        "policy_check_version": POLICY_CHECK_VERSION,
        "comparator": comparator_settings(),
        "isolation": isolation,
        "neighbours": neighbours,
        "gold_audit": audit,
    })
    accuracy = cases.passed / cases.scored if cases.scored else None  # a rate over nothing is none
    accuracy_generated = cases.passed_generated / cases.scored if cases.scored else None
    engine.bus.publish(
        Event(
            EVAL_FINISHED,
            None,
            {
                "mode": mode.name,
                "suites": [name for name, _, _ in loaded],
                "cases": len(records) + len(order),
                "accuracy": accuracy,
                "accuracy_generated": accuracy_generated,
                "spent": cases.spent,
                "stopped": stopped,
            },
        )
    )
    return CaseRuns(records=records, meta=meta, order=order)


def run_cases(request: RunRequest, engine: Engine, *, scorers: ScorerRegistry | None = None,
              on_case: OnCase | None = None, budget: Budget | None = None,
              index_folder: Path | None = None, keep_records: bool = True) -> CaseRuns:
    """Run what ``request`` asks on runtimes derived from ``engine`` (whose datasources and event
    bus the run shares); returns the case records and the run's metadata.

    ``scorers`` is the registry the request's scorer names resolve in (the built-ins and
    installed plugins by default); ``on_case(config, record, spent)`` is called after each case
    run; ``budget`` is a dollar ledger shared with other runs (every partition of a backfill);
    ``index_folder`` keeps the run's own copies of the schema indexes (None: a temporary folder;
    see ``running.isolation``); ``keep_records=False`` (a caller that streams the records from
    ``on_case``) returns no records, only their keys in the run's order (``CaseRuns.order``).

    Raises RunRefused (nothing spent), SelectionError (a selector matched nothing),
    ScorerError (an unknown scorer) or UnknownPriceError (an unpriced model).
    """
    from nl2sql_assets.llm.client import run_on_new_loop

    coro = arun_cases(request, engine, scorers=scorers, on_case=on_case, budget=budget, index_folder=index_folder,
                      keep_records=keep_records)
    with frozen_heap():
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return run_on_new_loop(coro)
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(run_on_new_loop, coro).result()


def run_shard_worker(config: ProjectConfig, request: RunRequest, out: Any) -> None:
    """A worker process of a sharded run: the engine rebuilt from the plain config (as the facade
    builds it), the request (narrowed to its shard) run, each record sent back as it finishes."""
    import os
    import traceback

    from nl2sql_assets.forking import exit_with_parent
    from nl2sql_assets.signals import defaults

    defaults()  # stops on SIGTERM whatever its parent ignored (or, forked, had set for itself)
    exit_with_parent()  # and never outlives the run that started it
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        from nl2sql_assets.datasources.registry import DatasourceRegistry
        from nl2sql_assets.engine.assembly import build_engine
        from nl2sql_assets.paths import schema_index_in, warehouse_dir

        last = 0.0

        def on_case(config_name: str, record: Any, spent: float) -> None:
            nonlocal last
            out.put(("record", record.model_dump_json(), spent - last))
            last = spent

        registry = DatasourceRegistry(config)
        try:  # its own engine, connections and (temporary) index copies
            engine = build_engine(config, registry, EventBus(), schema_index_in(warehouse_dir(config.root)))
            # every record goes back as it finishes: the worker keeps none (its memory stays flat)
            runs = run_cases(request, engine, scorers=ScorerRegistry.default(), on_case=on_case, keep_records=False)
        finally:
            registry.close()
        unknown = {name: c.unknown_cost_calls for name, c in runs.meta.configs.items()}
        out.put(("done", unknown, None))
    except KeyboardInterrupt:  # Ctrl-C reached the worker too: the run was interrupted, nothing failed
        out.put(("interrupted", None, None))
    except BaseException as exc:  # everything goes back to the running process
        out.put(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}", None))
