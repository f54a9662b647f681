"""The eval runner: ask every selected case once per role, score it, and build the report.

Three modes live here:

- ``plans`` runs each case's hand-written plan through the real pipeline on the gold LLM
  server (no key, no cost). Case runs go out concurrently, up to
  ``settings.max_concurrency`` at a time, because each one mostly waits on local HTTP.
- ``full`` runs the configured model(s), priced and capped. Case runs go out one at a time:
  the cap's promise ("the run passes the cap by at most one case") only holds when the
  cost of every earlier case is known before the next one starts. Running cases
  concurrently would let several unknown costs land past the cap at once.
- ``retrieval`` runs datasource routing and schema retrieval only, on the local embedder (no
  key, no model call, no cost): every approved answerable case (and routing case), once per
  role allowed to read it. The search always runs (``full_snapshot_max_tables`` is 0 for the
  run), each case is retrieved against the datasource it names, and its query is the question
  alone. Case runs go one at a time: the embedder already uses both cores.

Every case run gets its own run scope on the engine's bus (``run.started`` carries the
case in ``context``), then an ``eval.case`` event; the run ends with ``eval.finished``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nl2sql_assets.config import NODE_NAMES, ConfigError, LLMConfig, PriceRow, ProjectConfig
from nl2sql_assets.engine.events import EVAL_CASE, EVAL_FINISHED, Event, EventBus
from nl2sql_assets.engine.result import QueryResult
from nl2sql_assets.errors import UserError
from nl2sql_assets.evaluation.case_record import CaseRecord
from nl2sql_assets.evaluation.scorers import (
    EXECUTION_SCORERS,
    CaseRun,
    Score,
    Scorer,
    ScorerError,
    ScorerRegistry,
    case_status,
    score_run,
)
from nl2sql_assets.evaluation.selection import RoleRun, SelectionError, role_runs, select_cases
from nl2sql_assets.redact import get_logger, redact

if TYPE_CHECKING:
    from nl2sql_assets.engine.pipeline import Engine
    from nl2sql_assets.evaluation.report import EvalReport, RunMeta
    from nl2sql_assets.evaluation.suite import EvalSuite
    from nl2sql_assets.evaluation.warehouse import SpendLedger

log = get_logger(__name__)  # redacting: see nl2sql_assets.redact

PLANS_CONFIG = "plans"
RETRIEVAL_CONFIG = "retrieval"
DEFAULT_CONFIG = "default"
ENGINE_ERROR = "ENGINE_ERROR"  # the engine raised instead of returning a result
OnCase = Callable[[str, CaseRecord, float], None]

__all__ = [
    "ENGINE_ERROR",
    "RunRefused",
    "SelectionError",
    "arun_eval",
    "build_case_record",
    "rows_sha256",
    "run_eval",
]


class RunRefused(UserError, RuntimeError):
    """The run cannot start as asked (mode full without a cost cap, a case without a plan in
    mode plans, an llm section given to a mode that runs no model). Nothing was spent."""


# ---------------------------------------------------------------- small pure helpers


def rows_sha256(rows: list[list[Any]] | None) -> str | None:
    """SHA-256 of the rows' canonical JSON, so passes can be compared without keeping rows."""
    if rows is None:
        return None
    blob = json.dumps(rows, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _models(llm: LLMConfig, nodes: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in nodes:
        try:
            out[node] = llm.for_node(node).model
        except ConfigError:
            continue
    return out


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
    mode: str,
    pass_index: int,
    result: QueryResult,
    scores: dict[str, Score],
    latency_s: float,
    models: dict[str, str],
    cost_usd: float | None,
    unknown_cost_calls: int,
    engine_error: bool = False,
) -> CaseRecord:
    """One case run's compact verdict: statuses from the scores, and what the run produced."""
    case = rr.case
    status, reason = case_status(scores)
    lenient, _ = case_status(scores, lenient=True)
    execution: str | None = None
    if case.kind != "routing" and mode != "retrieval":  # mode retrieval executes nothing
        execution, _ = case_status(scores, only=EXECUTION_SCORERS)
    if engine_error:
        status = lenient = "error"
        execution = None if execution is None else "error"
        reason = f"engine: {result.error_message}"
    rows = result.rows
    faith = scores.get("faithfulness")
    faithfulness = None
    if faith is not None and faith.passed is not None:
        faithfulness = {
            k: faith.detail[k]
            for k in ("faithful", "unsupported_numbers", "unsupported_entities", "checked")
            if k in faith.detail
        }
    return CaseRecord(
        suite=rr.suite,
        case_id=case.id,
        role=rr.role,
        config=config_name,
        mode=mode,  # type: ignore[arg-type]
        pass_index=pass_index,
        expected=rr.expected,
        status=status,  # type: ignore[arg-type]
        lenient_status=lenient,  # type: ignore[arg-type]
        execution_status=execution,  # type: ignore[arg-type]
        reason=reason,
        scores=scores,
        result_status=result.status,
        error_code=result.error_code,
        error_message=result.error_message,
        sql=result.sql,
        plan=result.plan,
        answer=result.answer.summary if result.answer is not None else None,
        datasources=list(result.datasources),
        columns=list(result.columns),
        row_count=len(rows) if rows is not None else None,
        rows_sha256=rows_sha256(rows),
        source=result.source,
        tags=list(case.tags),
        difficulty=case.difficulty,
        models=dict(models),
        usage=result.usage,
        cost_usd=cost_usd,
        unknown_cost_calls=unknown_cost_calls,
        latency_s=latency_s,
        timings=dict(result.timings),
        retries=result.retries,
        faithfulness=faithfulness,
        retrieval=result.retrieval,
        routed=result.routing,
    )


# ---------------------------------------------------------------- one run's state


@dataclass
class _ConfigRun:
    """One config: the runtime that answers, its llm section and its tallies."""

    name: str
    llm: LLMConfig
    runtime: Any  # Engine
    models: dict[str, str]
    generated_runtime: Any = None  # mode full: the curated-off runtime, made on first need
    planned: int = 0
    completed: int = 0
    unknown_cost_calls: int = 0


@dataclass
class _Run:
    mode: str
    scorers: dict[str, Scorer]
    bus: EventBus
    on_case: OnCase | None
    records: list[CaseRecord | None] = field(default_factory=list)
    spent: float = 0.0
    warned_unknown: bool = False

    def warn_unknown(self, config: str, count: int) -> None:
        if count and not self.warned_unknown:
            self.warned_unknown = True
            log.warning(
                "config %r: %d model call(s) reported no token counts and cannot be priced; "
                "they are left out of spent (a lower bound) and counted in unknown_cost_calls",
                config,
                count,
            )


@dataclass(frozen=True)
class _Job:
    index: int
    rr: RoleRun
    pass_index: int
    config: str


async def _ask(runtime: Any, rr: RoleRun, pass_index: int, config: str) -> tuple[QueryResult, float, bool]:
    context = {"case_id": rr.case.id, "suite": rr.suite, "pass": pass_index, "config": config, "role": rr.role}
    started = time.perf_counter()
    try:
        result = await runtime.aask(rr.case.question, rr.role, context=context)
        failed = False
    except Exception as exc:  # the engine should return errors; a raise must not sink the run
        log.exception("case %s (%s) raised in the engine", rr.case.id, rr.role)
        result, failed = _error_result(rr, exc), True
    return result, time.perf_counter() - started, failed


def _score_and_record(
    run: _Run, job: _Job, cfg: _ConfigRun, result: QueryResult, latency: float, failed: bool,
    cost: float | None, unknown: int,
) -> CaseRecord:
    case_run = CaseRun(
        case=job.rr.case,
        role=job.rr.role,
        mode=run.mode,  # type: ignore[arg-type]
        result=result,
        rows=result.rows,
        columns=result.columns,
        retrieval=result.retrieval,
        routed=result.routing,
    )
    scores = score_run(run.scorers, case_run)
    return build_case_record(
        rr=job.rr, config_name=cfg.name, mode=run.mode, pass_index=job.pass_index, result=result, scores=scores,
        latency_s=latency, models=cfg.models, cost_usd=cost, unknown_cost_calls=unknown, engine_error=failed,
    )


def _price(calls: Any, cfg: _ConfigRun) -> tuple[float, int]:
    from nl2sql_assets.llm.prices import price_calls

    return price_calls(calls, cfg.llm, config=cfg.name)


def _finish_case(run: _Run, job: _Job, cfg: _ConfigRun, record: CaseRecord, cost: float) -> None:
    run.records[job.index] = record
    cfg.completed += 1
    run.spent += cost
    run.bus.publish(
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
    if run.on_case is not None:
        run.on_case(cfg.name, record, run.spent)


async def _one_case(run: _Run, job: _Job, cfg: _ConfigRun) -> tuple[CaseRecord, float]:
    """Ask, price and score one case run; a verified answer in mode full is asked again on the
    generated path. Returns the record and the dollars it spent (reruns included)."""
    result, latency, failed = await _ask(cfg.runtime, job.rr, job.pass_index, cfg.name)
    cost, unknown = _price(result.calls, cfg)
    cfg.unknown_cost_calls += unknown
    run.warn_unknown(cfg.name, unknown)
    record = _score_and_record(run, job, cfg, result, latency, failed, None if unknown else cost, unknown)
    total = cost
    if result.source == "verified" and cfg.generated_runtime is not None:
        g_result, g_latency, g_failed = await _ask(cfg.generated_runtime, job.rr, job.pass_index, cfg.name)
        g_cost, g_unknown = _price(g_result.calls, cfg)
        cfg.unknown_cost_calls += g_unknown
        run.warn_unknown(cfg.name, g_unknown)
        generated = _score_and_record(
            run, job, cfg, g_result, g_latency, g_failed, None if g_unknown else g_cost, g_unknown
        )
        record = record.model_copy(update={"generated": generated})
        total += g_cost
    return record, total


# ---------------------------------------------------------------- the two modes


async def _run_concurrently(run: _Run, jobs: list[_Job], configs: dict[str, _ConfigRun], limit: int) -> None:
    semaphore = asyncio.Semaphore(max(1, limit))

    async def go(job: _Job) -> None:
        async with semaphore:
            cfg = configs[job.config]
            record, cost = await _one_case(run, job, cfg)
            _finish_case(run, job, cfg, record, cost)

    try:
        async with asyncio.TaskGroup() as group:
            for job in jobs:
                group.create_task(go(job))
    except BaseExceptionGroup as group_error:  # the caller sees the first failure itself
        raise group_error.exceptions[0] from None


async def _run_capped(run: _Run, jobs: list[_Job], configs: dict[str, _ConfigRun], cap: float,
                      budget: SpendLedger | None = None) -> str | None:
    """One case run at a time. Before each (but the first), the most expensive case so far is
    added to what was spent; if that could pass the cap, the run stops there.

    With a ``budget`` (a spend ledger shared by several runs, e.g. every partition of a
    backfill), the same rule is applied to everything spent under that budget, by any run."""
    most = 0.0
    for n, job in enumerate(jobs):
        entry = f"{uuid.uuid4().hex}:{job.config}:{job.pass_index}:{job.rr.case.id}@{job.rr.role}"
        if budget is not None:
            while (decision := budget.reserve(entry, cap)) == "wait":
                await asyncio.sleep(0.2)
            if decision == "stop":
                log.warning("stopping at the shared cost cap of $%.2f (%s)", cap, budget.totals())
                return "max_cost"
        elif n > 0 and run.spent + most > cap:
            log.warning(
                "stopping at the cost cap: spent $%.4f, the next case may cost up to $%.4f, cap $%.2f "
                "(%d of %d case runs done)", run.spent, most, cap, n, len(jobs),
            )
            return "max_cost"
        cfg = configs[job.config]
        try:
            record, cost = await _one_case(run, job, cfg)
        except BaseException:
            if budget is not None:  # release the reservation; nothing was priced
                budget.spend(entry, 0.0, failed=True)
            raise
        if budget is not None:
            budget.spend(entry, cost, config=job.config, case=job.rr.case.id, role=job.rr.role)
        most = max(most, cost)
        _finish_case(run, job, cfg, record, cost)
    return None


async def _run_retrieval(run: _Run, jobs: list[_Job], configs: dict[str, _ConfigRun]) -> None:
    """Mode retrieval: route and retrieve each case run in its own run scope, one at a time."""
    for cfg in configs.values():  # load the embedder and every index first: latency is the search alone
        for hook in (cfg.runtime.router, cfg.runtime.retriever):
            prepare = getattr(hook, "prepare", None)
            if callable(prepare):
                await asyncio.to_thread(prepare)
    for job in jobs:
        cfg = configs[job.config]
        rr = job.rr
        context = {"case_id": rr.case.id, "suite": rr.suite, "pass": job.pass_index, "config": cfg.name,
                   "role": rr.role}
        # A routing case says where a question goes, not what it needs: nothing to retrieve.
        datasource = rr.case.datasources[0] if rr.case.kind != "routing" else None
        started = time.perf_counter()
        try:
            result = await cfg.runtime.aretrieve(rr.case.question, rr.role, datasource=datasource, context=context)
            failed = False
        except Exception as exc:  # a broken index or datasource must not sink the run
            log.exception("case %s (%s) raised in retrieval", rr.case.id, rr.role)
            result, failed = _error_result(rr, exc), True
        latency = time.perf_counter() - started
        record = _score_and_record(run, job, cfg, result, latency, failed, 0.0, 0)
        _finish_case(run, job, cfg, record, 0.0)


def _retrieval_runs(runs: list[RoleRun]) -> list[RoleRun]:
    """Mode retrieval's runs: the roles allowed to read an answerable case (or a routing case).
    A refusal or an unanswerable question has nothing to retrieve."""
    return [rr for rr in runs if rr.expected == "allowed" and (rr.case.answerable or rr.case.kind == "routing")]


# ---------------------------------------------------------------- setting a run up


def _load_suites(config: ProjectConfig, suites: Sequence[str | Path] | None) -> list[tuple[str, Path, EvalSuite]]:
    from nl2sql_assets.evaluation.suite import load_suite

    paths = list(suites) if suites is not None else list(config.evals_config.suites)
    if not paths:
        raise SelectionError("no suites to run: pass suites=[...] or list them under suites in evals.yaml")
    out: list[tuple[str, Path, EvalSuite]] = []
    for p in paths:
        path = config.resolve(p)
        if not Path(p).is_absolute() and not path.exists() and Path(p).exists():
            path = Path(p).resolve()  # a suite given relative to the working folder
        suite = load_suite(path)
        out.append((suite.name or path.stem, path, suite))
    names = [name for name, _, _ in out]
    if len(set(names)) != len(names):
        raise SelectionError(f"two suites share a name (their file stem): {names}")
    return out


def _llm_configs(config: ProjectConfig, llm: LLMConfig | Mapping[str, LLMConfig] | None) -> dict[str, LLMConfig]:
    from nl2sql_assets.evaluation.configs import validate_config_name

    if llm is None:
        return {DEFAULT_CONFIG: config.llm}
    if isinstance(llm, LLMConfig):
        return {DEFAULT_CONFIG: llm}
    if not isinstance(llm, Mapping) or not llm:
        raise RunRefused("llm must be None, one llm section (LLMConfig) or a non-empty mapping of names to them")
    out: dict[str, LLMConfig] = {}
    for name, section in llm.items():
        validate_config_name(str(name))
        if not isinstance(section, LLMConfig):
            raise RunRefused(f"llm[{name!r}] must be an LLMConfig, not {type(section).__name__}")
        out[str(name)] = section
    return out


def _check_roles(config: ProjectConfig, runs: list[RoleRun]) -> None:
    roles = config.policies.roles
    if not roles:
        return
    for rr in runs:
        if rr.role not in roles:
            raise SelectionError(
                f"suite {rr.suite!r}, case {rr.case.id!r}: outcome names role {rr.role!r}, "
                f"which the policy does not define (roles: {sorted(roles)})"
            )


def _check_plans(runs: list[RoleRun]) -> None:
    missing: list[str] = []
    for rr in runs:
        needs = rr.case.sql is not None or rr.case.kind == "routing"
        if needs and rr.case.plan is None and f"{rr.suite}:{rr.case.id}" not in missing:
            missing.append(f"{rr.suite}:{rr.case.id}")
    if missing:
        raise RunRefused(
            f"mode plans needs a hand-written plan for every answerable case; without one: {', '.join(missing)}"
        )


def _retrieval_runtime(config: ProjectConfig, engine: Engine) -> tuple[Any, dict[str, Any]]:
    """Mode retrieval's runtime (the search always runs, no curated answers) and the settings
    its report keeps. The engine's own retriever and router are used when it has them."""
    from nl2sql_assets.retrieval.routing import default_hooks

    retriever, router = engine.retriever, engine.router
    if retriever is None or router is None:
        default_retriever, default_router = default_hooks(config, engine.registry)
        retriever = retriever or default_retriever
        router = router or default_router
    runtime = engine.derive(retriever=retriever, router=router, curated=False, plan_cache=False,
                            refusal_names_tables=False, full_snapshot_max_tables=0)
    r, routing = config.settings.retrieval, config.settings.routing
    describe = getattr(retriever, "describe", None)
    described = describe() if callable(describe) else {}
    settings: dict[str, Any] = {
        "full_snapshot_max_tables": 0,
        "k_tables": r.k_tables,
        "k_columns": r.k_columns,
        "mmr_lambda": r.mmr_lambda,
        **{k: v for k, v in described.items() if k not in ("k_tables", "k_columns", "mmr_lambda")},
        "routing_candidates": routing.candidates,
        "routing_max_datasources": routing.max_datasources,
        "query": "the question alone",
    }
    settings.setdefault("embedder", type(retriever).__name__)
    return runtime, settings


def _databases(registry: Any, runs: list[RoleRun]) -> list[dict[str, Any]]:
    """Identity of every datasource the selected cases name (first seen first)."""
    ids = list(dict.fromkeys(ds for rr in runs for ds in rr.case.datasources))
    out = []
    for ds_id in ids:
        if ds_id not in registry:
            case = next(rr for rr in runs if ds_id in rr.case.datasources)
            raise SelectionError(
                f"suite {case.suite!r}, case {case.case.id!r}: datasource {ds_id!r} is not configured "
                f"(known: {registry.ids})"
            )
        snap = registry.snapshot(ds_id)
        out.append(
            {
                "datasource_id": ds_id,
                "engine": snap.engine,
                "schema_fingerprint": snap.fingerprint(),
                "tables": len(snap.tables),
                "columns": snap.column_count,
            }
        )
    return out


def _jobs(runs: list[RoleRun], pass_list: list[int], config_names: list[str]) -> list[_Job]:
    """Pass by pass, case by case; the configs of a case side by side, so a run the cap
    stops has asked every config the same cases."""
    jobs: list[_Job] = []
    for p in pass_list:
        for rr in runs:
            for name in config_names:
                jobs.append(_Job(len(jobs), rr, p, name))
    return jobs


def _accuracies(records: list[CaseRecord], first: str | None) -> tuple[float, float]:
    mine = [r for r in records if r.config == first and r.status != "skip"]
    if not mine:
        return 0.0, 0.0
    overall = sum(r.status == "pass" for r in mine) / len(mine)
    generated = sum((r.generated or r).status == "pass" for r in mine) / len(mine)
    return overall, generated


# ---------------------------------------------------------------- the entry points


async def arun_eval(
    config: ProjectConfig,
    *,
    suites: Sequence[str | Path] | None = None,
    mode: str = "full",
    llm: LLMConfig | Mapping[str, LLMConfig] | None = None,
    cases: Sequence[str] | None = None,
    roles: Sequence[str] | None = None,
    scorers: Sequence[str] | None = None,
    curated: bool | None = None,
    passes: int | None = None,
    pass_numbers: Sequence[int] | None = None,
    max_cost_usd: float | None = None,
    on_case: OnCase | None = None,
    clarify: bool = False,
    registry: Any = None,
    bus: EventBus | None = None,
    scorer_registry: ScorerRegistry | None = None,
    engine: Engine | None = None,
    budget: SpendLedger | None = None,
) -> EvalReport:
    """``run_eval`` on the running event loop."""
    from nl2sql_assets import __version__
    from nl2sql_assets.evaluation.evaluator import COMPARATOR_VERSION
    from nl2sql_assets.evaluation.records import git_info
    from nl2sql_assets.evaluation.report import RunMeta, build_report
    from nl2sql_assets.evaluation.suite import suite_digest

    started_at = datetime.now(UTC)
    if mode not in ("full", "plans", "retrieval"):
        raise RunRefused(f"unknown mode {mode!r}: expected full, plans or retrieval")
    evals = config.evals_config

    # What to run.
    loaded = _load_suites(config, suites)
    selected = select_cases([(name, suite) for name, _, suite in loaded], cases)
    if not selected:
        raise SelectionError(f"no approved case in suite(s) {[name for name, _, _ in loaded]}")
    runs, skipped = role_runs(selected, roles, clarify=clarify)
    if mode == "retrieval":
        runs = _retrieval_runs(runs)
        if not runs:
            raise SelectionError("mode retrieval: no selected case is answerable by a role allowed to read it")
    _check_roles(config, runs)
    n_passes = passes if passes is not None else evals.passes
    if n_passes < 1:
        raise RunRefused(f"passes must be at least 1, got {n_passes}")
    pass_list = sorted(set(pass_numbers)) if pass_numbers else list(range(1, n_passes + 1))
    if any(p < 1 for p in pass_list):
        raise RunRefused(f"pass numbers start at 1, got {pass_list}")

    scorer_names = list(scorers) if scorers is not None else list(evals.scorers)
    try:
        built = (scorer_registry or ScorerRegistry.default()).build(
            scorer_names, mode, configs={"routing": {"max_datasources": config.settings.routing.max_datasources}}
        )
    except ScorerError as exc:
        if scorers is not None or evals.source is None:
            raise
        raise ScorerError(f"{evals.source}: scorers: {exc}") from None  # the names came from that file

    # The engine every runtime derives from, and the bus they publish on.
    own_engine = engine is None
    if engine is None:
        from nl2sql_assets.engine.pipeline import Engine

        engine = Engine(config, registry=registry, bus=bus if bus is not None else EventBus())
        if mode != "plans":  # the project's retriever and router (mode plans never reaches them)
            from nl2sql_assets.retrieval.routing import default_hooks

            engine.retriever, engine.router = default_hooks(config, engine.registry)
    elif bus is not None and engine.bus is not bus:
        raise RunRefused("engine= and bus= disagree: the engine publishes on another bus")
    bus = engine.bus
    ds_registry = engine.registry
    databases = _databases(ds_registry, runs)

    configs: dict[str, _ConfigRun] = {}
    cap: float | None = None
    use_curated = False
    server = None
    retrieval_settings: dict[str, Any] = {}
    try:
        if mode == "retrieval":
            if llm is not None:
                raise RunRefused("llm= is for mode full; mode retrieval calls no model")
            runtime, retrieval_settings = _retrieval_runtime(config, engine)
            configs[RETRIEVAL_CONFIG] = _ConfigRun(RETRIEVAL_CONFIG, LLMConfig(), runtime,
                                                   {"retriever": retrieval_settings["embedder"]})
        elif mode == "plans":
            if llm is not None:
                raise RunRefused("llm= is for mode full; mode plans always runs on the gold LLM")
            _check_plans(runs)
            from nl2sql_assets.evaluation.gold_llm import GoldLLMServer

            seen: dict[str, Any] = {}
            for rr in runs:
                seen.setdefault(rr.case.id, rr.case)
            server = GoldLLMServer(list(seen.values()), bus).start()
            gold = server.llm_config()
            # The gold model is free: a zero price row keeps one pricing path for both modes.
            zero = PriceRow(input=0.0, cached_input=0.0, cache_write=0.0, output=0.0, source="gold LLM (free)")
            gold = gold.model_copy(update={"prices": {m: zero for m in set(_models(gold, NODE_NAMES).values())}})
            runtime = engine.derive(llm=gold, curated=False, refusal_names_tables=False)
            nodes = [n for n in NODE_NAMES if n != "curated"]
            configs[PLANS_CONFIG] = _ConfigRun(PLANS_CONFIG, gold, runtime, _models(gold, nodes))
        else:
            cap = max_cost_usd if max_cost_usd is not None else evals.max_cost_usd
            if cap is None:
                raise RunRefused(
                    "mode full calls a paid model and needs a dollar cap: pass max_cost_usd or set it in evals.yaml"
                )
            if cap <= 0:
                raise RunRefused(f"max_cost_usd must be above 0, got {cap}")
            use_curated = evals.curated if curated is None else curated
            sections = _llm_configs(config, llm)
            nodes = [n for n in NODE_NAMES if n != "curated" or (use_curated and config.curated)]
            from nl2sql_assets.llm.prices import check_prices

            check_prices(sections, nodes)  # before any call: an unpriced model stops the run here
            from nl2sql_assets.llm.providers import missing_credentials

            if problems := missing_credentials(sections, nodes):
                raise RunRefused("no API key for mode full:\n  " + "\n  ".join(problems))
            for name, section in sections.items():
                runtime = engine.derive(llm=section, curated=use_curated, plan_cache=False, refusal_names_tables=False)
                generated = (
                    engine.derive(llm=section, curated=False, plan_cache=False, refusal_names_tables=False)
                    if use_curated and config.curated
                    else None
                )
                configs[name] = _ConfigRun(name, section, runtime, _models(section, nodes), generated)

        jobs = _jobs(runs, pass_list, list(configs))
        for job in jobs:
            configs[job.config].planned += 1
        run = _Run(mode=mode, scorers=built, bus=bus, on_case=on_case, records=[None] * len(jobs))
        stopped: str | None = None
        if mode == "retrieval":
            await _run_retrieval(run, jobs, configs)
        elif mode == "plans":
            await _run_concurrently(run, jobs, configs, config.settings.max_concurrency)
        else:
            assert cap is not None
            stopped = await _run_capped(run, jobs, configs, cap, budget)
    finally:
        if server is not None:
            server.stop()
        if own_engine and registry is None:
            ds_registry.close()

    records = [r for r in run.records if r is not None]
    git_commit, git_dirty = git_info()
    meta: RunMeta = RunMeta(
        mode=mode,  # type: ignore[arg-type]
        suites=[{"name": name, "path": str(path), "digest": suite_digest(path)} for name, path, _ in loaded],
        roles=sorted({rr.role for rr in runs}),
        passes=len(pass_list),
        curated=use_curated,
        clarify=clarify,
        max_cost_usd=cap,
        spent=run.spent,
        stopped=stopped,  # type: ignore[arg-type]
        skipped=skipped * len(pass_list),
        settings={**retrieval_settings, "pass_numbers": pass_list} if mode == "retrieval" else {
            "plan_cache": config.settings.plan_cache if mode == "plans" else False,
            "max_concurrency": config.settings.max_concurrency if mode == "plans" else 1,
            "retry_budget": config.settings.retry_budget,
            "pass_numbers": pass_list,
        },
        databases=databases,
        configs={
            name: {
                "models": c.models,
                "planned_cases": c.planned,
                "completed_cases": c.completed,
                "unknown_cost_calls": c.unknown_cost_calls,
            }
            for name, c in configs.items()
        },
        scorers=list(built),
        run_stamp={
            "started_at": started_at,
            "finished_at": datetime.now(UTC),
            "package_version": __version__,
            "git_commit": git_commit,
            "git_dirty": git_dirty,
        },
        comparator_version=COMPARATOR_VERSION,
    )
    report = build_report(records, meta)
    accuracy, accuracy_generated = _accuracies(records, next(iter(configs), None))
    bus.publish(
        Event(
            EVAL_FINISHED,
            None,
            {
                "mode": mode,
                "suites": [name for name, _, _ in loaded],
                "cases": len(records),
                "accuracy": accuracy,
                "accuracy_generated": accuracy_generated,
                "spent": run.spent,
                "stopped": stopped,
            },
        )
    )
    return report


def run_eval(
    config: ProjectConfig,
    *,
    suites: Sequence[str | Path] | None = None,
    mode: str = "full",
    llm: LLMConfig | Mapping[str, LLMConfig] | None = None,
    cases: Sequence[str] | None = None,
    roles: Sequence[str] | None = None,
    scorers: Sequence[str] | None = None,
    curated: bool | None = None,
    passes: int | None = None,
    pass_numbers: Sequence[int] | None = None,
    max_cost_usd: float | None = None,
    on_case: OnCase | None = None,
    clarify: bool = False,
    registry: Any = None,
    bus: EventBus | None = None,
    scorer_registry: ScorerRegistry | None = None,
    engine: Engine | None = None,
    budget: SpendLedger | None = None,
) -> EvalReport:
    """Run the selected cases in mode ``plans``, ``full`` or ``retrieval`` and return the EvalReport.

    Arguments left None take evals.yaml's value. ``llm`` (mode full) is None (the project's
    own llm section, reported as ``default``), one LLMConfig, or a mapping of names to them;
    ``cases`` narrows by case id or tag; ``pass_numbers`` runs exactly those pass indexes
    (Dagster runs one pass per partition); ``on_case(config, record, spent)`` is called after
    each case run. ``registry``, ``bus`` and ``engine`` let a project share its datasources,
    event bus and engine; the run itself always uses runtimes derived from the engine.

    Raises RunRefused (nothing spent), SelectionError (a selector matched nothing),
    ScorerError (an unknown scorer) or UnknownPriceError (mode full, an unpriced model).
    """
    coro = arun_eval(
        config, suites=suites, mode=mode, llm=llm, cases=cases, roles=roles, scorers=scorers, curated=curated,
        passes=passes, pass_numbers=pass_numbers, max_cost_usd=max_cost_usd, on_case=on_case, clarify=clarify,
        registry=registry, bus=bus, scorer_registry=scorer_registry, engine=engine, budget=budget,
    )
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()
