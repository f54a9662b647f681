"""The reference engine: one question, for one role, through the nodes to a QueryResult.

resolver (LLM) → decomposer (LLM) → planner (LLM) → validator → SQL generator → policy check
→ executor → synthesizer (LLM), with the refiner (LLM) repairing a plan after a validation or
execution error within the retry budget. A security refusal stops the run at once: the refiner
is never asked to find a way around a policy. The policy check judges the exact SQL about to
run (``nl2sql_assets.policy.check_sql``), for generated plans and curated answers alike, and
has the last word: a plan the validator passed is still refused when its SQL reads what the
role may not. Every run is a scope on the event bus (``run.started`` before any model call,
``run.finished`` always), which is how listeners — the gold LLM among them — tie HTTP calls
to questions.

``aask`` is safe to run many at once on one event loop: model calls are async, and blocking
database work runs in worker threads.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import dataclasses
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

from nl2sql_assets.config import (
    ConfigError,
    CuratedAnswer,
    DatasourceAccess,
    LLMConfig,
    PoliciesConfig,
    ProjectConfig,
)
from nl2sql_assets.datasources.base import DatasourceAdapter, DatasourceError
from nl2sql_assets.datasources.schema import SchemaSnapshot
from nl2sql_assets.engine import nodes
from nl2sql_assets.engine.candidates import CandidateOutcome, select_candidate
from nl2sql_assets.engine.conversation import Conversation, Turn, conversation_key, conversation_text
from nl2sql_assets.engine.events import RUN_FINISHED, RUN_STARTED, Event, EventBus
from nl2sql_assets.engine.executor import execute
from nl2sql_assets.engine.plan import PlanModel
from nl2sql_assets.engine.result import (
    EXECUTION_ERROR,
    LLM_ERROR,
    PROVIDER_ERROR,
    QUESTION_NOT_ANSWERABLE,
    SECURITY_VIOLATION,
    VALIDATION_ERROR,
    Answer,
    CandidateRun,
    LLMCall,
    QueryResult,
    ResultSet,
    Status,
)
from nl2sql_assets.engine.sqlgen import generate_sql, qualify_plan
from nl2sql_assets.engine.validator import ValidationOutcome, validate_plan
from nl2sql_assets.llm.client import LLMCallError, LLMClient
from nl2sql_assets.policy import PolicyDecision, check_sql
from nl2sql_assets.policy.facts import DatabaseWord
from nl2sql_assets.redact import redact

T = TypeVar("T", bound=BaseModel)
R = TypeVar("R")

PLAN_CACHE_SIZE = 1024

#: A schema retriever: (question, snapshot) → the tables and columns to show the planner.
#: Blocking (embeddings), so the engine runs it in a worker thread.
Retriever = Callable[[str, SchemaSnapshot], Mapping[str, Sequence[str]]]
#: A datasource router: question → the project's datasources ranked best first (embeddings).
Router = Callable[[str], Sequence[str]]


@dataclasses.dataclass(frozen=True)
class RuntimeOptions:
    """How a runtime differs from the serving engine's (what evaluation modes change)."""

    refusal_names_tables: bool | None = None  # None: policies.refusal_names_tables
    curated: bool = True  # match config.curated before planning
    plan_cache: bool = True  # reuse a plan that worked for the same (datasource, role, question)
    full_snapshot_max_tables: int | None = None  # None: settings.retrieval.full_snapshot_max_tables
    candidates: int | None = None  # None: settings.candidates (plans per question; >1 selects one)


class _Stop(Exception):
    """Ends a run early with an error status (the run's state says which); a refusal names the
    policy rule that fired."""

    def __init__(self, code: str, message: str, rule: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.rule = rule


class _Clarify(Exception):
    """Ends a run early asking the user to narrow the question (status needs_clarification)."""

    def __init__(self, question: str) -> None:
        super().__init__(question)
        self.question = question


@dataclasses.dataclass
class _RunState:
    run_id: str
    question: str
    role: str
    calls: list[LLMCall] = dataclasses.field(default_factory=list)
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    plans: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    plan_errors: list[str] = dataclasses.field(default_factory=list)  # why each failed plan failed
    clarification: str | None = None
    plan: dict[str, Any] | None = None
    sql: str | None = None
    result_sets: list[ResultSet] = dataclasses.field(default_factory=list)
    datasources: list[str] = dataclasses.field(default_factory=list)
    routing: list[str] | None = None
    retrieval: dict[str, list[str]] | None = None
    answer: Answer | None = None
    retries: int = 0
    source: str = "generated"
    conversation: tuple[Turn, ...] = ()
    candidates: list[CandidateRun] = dataclasses.field(default_factory=list)
    selected_candidate: int | None = None
    curated_match: Literal["exact", "paraphrase"] | None = None

    @property
    def history(self) -> str:
        return conversation_text(self.conversation)

    def add_time(self, node: str, seconds: float) -> None:
        self.timings[node] = self.timings.get(node, 0.0) + seconds

    def result(self, status: Status, code: str | None = None, message: str | None = None,
               rule: str | None = None) -> QueryResult:
        return QueryResult(
            run_id=self.run_id,
            question=self.question,
            role=self.role,
            status=status,
            error_code=code,
            error_message=redact(message) if message else message,
            policy_rule=rule,
            result_sets=self.result_sets,
            sql=self.sql,
            plan=self.plan,
            plans=self.plans,
            plan_errors=self.plan_errors,
            clarification=self.clarification,
            answer=self.answer,
            datasources=self.datasources,
            retrieval=self.retrieval,
            routing=self.routing,
            calls=self.calls,
            timings=self.timings,
            retries=self.retries,
            source=self.source,  # type: ignore[arg-type]
            candidates=self.candidates,
            selected_candidate=self.selected_candidate,
            curated_match=self.curated_match,
        )


_loop_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _loop_lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="nl2sql-engine-loop", daemon=True).start()
            _loop = loop
            atexit.register(_close_background_loop, loop)
        return _loop


def _close_background_loop(loop: asyncio.AbstractEventLoop) -> None:
    """At exit: close the HTTP sessions the shared loop holds (the lean client's connection pool,
    litellm's clients), then stop the loop, so no session is left for the interpreter to find
    unclosed. A loop that is gone or wedged is left as it is."""
    if loop.is_closed() or not loop.is_running():
        return

    async def close_sessions() -> None:
        from nl2sql_assets.llm import openai_compat

        await openai_compat.close_client()
        import sys

        litellm = sys.modules.get("litellm")  # only when a call imported it
        closer = getattr(litellm, "close_litellm_async_clients", None) if litellm is not None else None
        if closer is not None:
            with contextlib.suppress(Exception):
                await closer()

    with contextlib.suppress(Exception):
        asyncio.run_coroutine_threadsafe(close_sessions(), loop).result(timeout=5)
    loop.call_soon_threadsafe(loop.stop)


def run_sync(coro: Coroutine[Any, Any, R]) -> R:
    """Run ``coro`` to completion from synchronous code, on the shared background loop (litellm's
    logging worker is stopped afterwards: a worker left on this long-lived loop would be dropped
    pending once another loop calls a model)."""
    from nl2sql_assets.llm.client import releasing

    coro = releasing(coro)
    loop = _background_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:  # called from inside the background loop itself: don't wait on ourselves
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, coro).result()
    return asyncio.run_coroutine_threadsafe(coro, loop).result()


def normalise_question(question: str) -> str:
    """For exact matching: case, runs of spaces and trailing punctuation do not count."""
    return re.sub(r"\s+", " ", question).strip().rstrip("?.! ").casefold()


class Engine:
    """The reference NL2SQL engine over a project's datasources, policies and LLM config."""

    def __init__(
        self,
        config: ProjectConfig,
        *,
        registry: Any = None,
        bus: EventBus | None = None,
        llm: LLMConfig | None = None,
        options: RuntimeOptions | None = None,
        retriever: Retriever | None = None,
        router: Router | None = None,
    ) -> None:
        if registry is None:
            from nl2sql_assets.datasources.registry import DatasourceRegistry

            registry = DatasourceRegistry(config)
        self.config = config
        self.registry = registry
        self.bus = bus if bus is not None else EventBus()
        self.llm = llm if llm is not None else config.llm
        self.options = options if options is not None else RuntimeOptions()
        self.retriever = retriever
        self.router = router
        self.client = LLMClient(self.llm.for_node)
        self._plan_cache: OrderedDict[tuple[str, str, str], PlanModel] = OrderedDict()
        self._curated = {normalise_question(c.question): c for c in config.curated}

    # ------------------------------------------------------------ runtimes

    def derive(
        self,
        *,
        llm: LLMConfig | None = None,
        retriever: Retriever | None = None,
        router: Router | None = None,
        policies: PoliciesConfig | None = None,
        **options: Any,
    ) -> Engine:
        """A new runtime on the same registry and bus; this engine is left as it is. Hooks left
        None are this engine's own; ``policies`` replaces the project's policy (a case's own)."""
        config = self.config if policies is None else self.config.model_copy(update={"policies": policies})
        return Engine(
            config,
            registry=self.registry,
            bus=self.bus,
            llm=llm if llm is not None else self.llm,
            options=dataclasses.replace(self.options, **options),
            retriever=retriever if retriever is not None else self.retriever,
            router=router if router is not None else self.router,
        )

    @property
    def refusal_names_tables(self) -> bool:
        if self.options.refusal_names_tables is not None:
            return self.options.refusal_names_tables
        return self.config.policies.refusal_names_tables

    def role_access(self, role: str, datasource_id: str) -> DatasourceAccess | None:
        """The role's access to a datasource; None (no RBAC) when the project defines no roles."""
        if not self.config.policies.roles:
            return None
        return self.config.policies.role(role).access(datasource_id)

    def _row_budget(self, access: DatasourceAccess | None) -> int | None:
        """The soft cap on what a statement without a LIMIT fetches: the smaller of the
        settings' and the role's row budgets."""
        budgets = [b for b in (self.config.settings.row_budget, access.row_budget if access else None) if b]
        return min(budgets) if budgets else None

    def check_policy(self, sql: str, role: str | None, datasource_id: str) -> PolicyDecision:
        """The final-SQL policy check this engine runs before executing ``sql`` for ``role`` on
        ``datasource_id``: the same decision, without running anything (policy probes call it)."""
        role = self._check_role(role)
        if datasource_id not in self.registry:
            raise ConfigError(f"unknown datasource {datasource_id!r}; known datasources: {self.registry.ids}")
        adapter: DatasourceAdapter = self.registry.get(datasource_id)
        snapshot = self.registry.snapshot(datasource_id)
        return self._policy(sql, adapter.dialect, snapshot, self.role_access(role, datasource_id), role,
                            _database_word(adapter))

    def _policy(self, sql: str, dialect: str, snapshot: SchemaSnapshot, access: DatasourceAccess | None,
                role: str, database: DatabaseWord | None = None) -> PolicyDecision:
        return check_sql(sql, dialect=dialect, schema=snapshot, access=access, role=role,
                         dangerous_functions=self.config.policies.dangerous_for(dialect), database=database)

    # ------------------------------------------------------------ asking

    def ask(
        self,
        question: str,
        role: str | None = None,
        *,
        run_id: str | None = None,
        context: dict | None = None,
        conversation: Conversation = (),
    ) -> QueryResult:
        """``aask`` from synchronous code.

        Runs on one long-lived event loop in a daemon thread (shared by every engine), so
        repeated calls reuse litellm's HTTP connections and never make it move its logging
        worker between loops; this also works when the caller is inside a running loop.
        """
        return run_sync(self.aask(question, role, run_id=run_id, context=context, conversation=conversation))

    def _check_role(self, role: str | None) -> str:
        role = role or self.config.policies.default_role
        if self.config.policies.roles and role not in self.config.policies.roles:
            raise ConfigError(
                f"unknown role {role!r}; the policy defines {sorted(self.config.policies.roles)}"
            )
        return role

    async def aask(
        self,
        question: str,
        role: str | None = None,
        *,
        run_id: str | None = None,
        context: dict | None = None,
        conversation: Conversation = (),
    ) -> QueryResult:
        """Answer ``question`` for ``role``. ``conversation`` holds the earlier turns of a chat
        (question, SQL, answer each) a follow-up is read against: the LLM nodes are shown them."""
        role = self._check_role(role)
        state = _RunState(run_id=run_id or uuid.uuid4().hex, question=question, role=role,
                          conversation=tuple(Turn.model_validate(t) for t in conversation))
        with self._run_scope(state, context) as finished:
            finished.append(await self._run(state))
            return finished[0]

    async def aretrieve(
        self,
        question: str,
        role: str | None = None,
        *,
        datasource: str | None = None,
        run_id: str | None = None,
        context: dict | None = None,
    ) -> QueryResult:
        """Routing and schema retrieval only, as a question would run them, with no model call.

        The run is a scope like any question's (``run.started``, ``run.finished``) and closes
        with an empty result: no SQL, no rows, no answer. ``routing`` holds the router's
        ranking (None without a router); ``retrieval`` what the planner would be shown for
        ``datasource`` (None when no datasource is given). Mode retrieval runs this.
        """
        role = self._check_role(role)
        state = _RunState(run_id=run_id or uuid.uuid4().hex, question=question, role=role)
        with self._run_scope(state, context) as finished:
            if self.router is not None:
                router = self.router
                state.routing = list(await self._timed(state, "router", lambda: router(question), thread=True))
            if datasource is not None:
                if datasource not in self.registry:
                    raise ConfigError(f"unknown datasource {datasource!r}; known datasources: {self.registry.ids}")
                state.datasources = [datasource]
                await self._schema_for(await self._snapshot(datasource), state)
            finished.append(state.result("success"))
            return finished[0]

    @contextlib.contextmanager
    def _run_scope(self, state: _RunState, context: dict | None) -> Iterator[list[QueryResult]]:
        """One question's scope: ``run.started`` before anything runs, ``run.finished`` with the
        result's status whatever happens. The body appends its result to the yielded list."""
        self.bus.publish(Event(RUN_STARTED, state.run_id,
                               {"question": state.question, "role": state.role, "context": dict(context or {})}))
        finished: list[QueryResult] = []
        try:
            yield finished
        finally:
            result = finished[0] if finished else None
            payload: dict[str, Any] = (
                {"status": result.status, "error_code": result.error_code, "source": result.source}
                if result is not None
                else {"status": "error", "error_code": None}
            )
            self.bus.publish(Event(RUN_FINISHED, state.run_id, payload))

    async def _run(self, state: _RunState) -> QueryResult:
        try:
            if self.options.curated and self._curated:
                hit = await self._curated_answer(state)
                if hit is not None:
                    return hit
            return await self._generated(state)
        except _Stop as stop:
            return state.result("error", stop.code, stop.message, stop.rule)
        except _Clarify as ask_back:  # nothing ran: the question goes back to the user first
            state.clarification = redact(ask_back.question)
            return state.result("needs_clarification")
        except LLMCallError as exc:
            state.calls.append(exc.call)
            return state.result("error", PROVIDER_ERROR if exc.call.error_kind else LLM_ERROR, str(exc))
        except DatasourceError as exc:  # the datasource itself failed (missing file, cannot open)
            return state.result("error", exc.code, str(exc))

    # ------------------------------------------------------------ nodes

    async def _llm(self, state: _RunState, node: str, messages: list[dict[str, Any]], model: type[T]) -> T:
        started = time.perf_counter()
        try:
            parsed, call = await self.client.structured(node, messages, model, run_id=state.run_id)
        finally:
            state.add_time(node, time.perf_counter() - started)
        state.calls.append(call)
        return parsed

    async def _timed(
        self, state: _RunState, node: str, fn: Callable[[], Any], *, thread: bool = False
    ) -> Any:
        started = time.perf_counter()
        try:
            return await asyncio.to_thread(fn) if thread else fn()
        finally:
            state.add_time(node, time.perf_counter() - started)

    async def _snapshot(self, ds_id: str) -> SchemaSnapshot:
        # Taken once per datasource: later cases read it without a hop to a thread.
        cached = getattr(self.registry, "cached_snapshot", None)
        snap = cached(ds_id) if cached is not None else None
        return snap if snap is not None else await asyncio.to_thread(self.registry.snapshot, ds_id)

    async def _resolve(self, state: _RunState) -> str:
        lines = []
        for ds_id in self.registry.ids:
            try:
                snap: SchemaSnapshot | None = await self._snapshot(ds_id)
            except (DatasourceError, ConfigError, OSError):
                snap = None
            cfg = self.registry.config(ds_id)
            lines.append(nodes.datasource_line(ds_id, cfg.description if cfg is not None else "", snap))
        selection = await self._llm(
            state, "resolver", nodes.resolver_messages(state.question, lines, state.history),
            nodes.DatasourceSelection
        )
        state.routing = list(selection.datasources)
        if selection.needs_clarification:
            raise _Clarify(selection.clarification or "Could you say more precisely what you are asking for?")
        if not selection.answerable or not selection.datasources:
            reason = f": {selection.reason}" if selection.reason else ""
            raise _Stop(QUESTION_NOT_ANSWERABLE, f"None of the datasources can answer this question{reason}")
        ds_id = selection.datasources[0]
        if ds_id not in self.registry:
            raise _Stop(
                VALIDATION_ERROR,
                f"the resolver chose datasource {ds_id!r}, which is not configured (known: {self.registry.ids})",
            )
        state.datasources = [ds_id]
        return ds_id

    async def _schema_for(self, snapshot: SchemaSnapshot, state: _RunState) -> str:
        """What the planner is shown, recorded as the run's retrieval: the whole schema when it
        has at most ``full_snapshot_max_tables`` tables or no retriever is plugged in, else what
        the retriever picks."""
        limit = self.options.full_snapshot_max_tables
        if limit is None:
            limit = self.config.settings.retrieval.full_snapshot_max_tables
        if self.retriever is not None and len(snapshot.tables) > limit:
            started = time.perf_counter()
            try:
                picked = await asyncio.to_thread(self.retriever, state.question, snapshot)
            finally:
                state.add_time("retriever", time.perf_counter() - started)
            state.retrieval = {t: list(cols) for t, cols in picked.items()}
            return nodes.schema_text(snapshot, state.retrieval)
        state.retrieval = {t.name: [c.name for c in t.columns] for t in snapshot.tables}
        return nodes.schema_text(snapshot)

    async def _generated(self, state: _RunState) -> QueryResult:
        ds_id = await self._resolve(state)
        adapter: DatasourceAdapter = self.registry.get(ds_id)
        snapshot = await self._snapshot(ds_id)
        access = self.role_access(state.role, ds_id)
        schema = await self._schema_for(snapshot, state)
        dialect = adapter.dialect
        word = _database_word(adapter)

        # A follow-up's plan depends on its conversation; N candidates are a fresh choice each time.
        cache_key = (ds_id, state.role, normalise_question(state.question), conversation_key(state.conversation))
        n_candidates = self.options.candidates or self.config.settings.candidates
        use_cache = self.options.plan_cache and self.config.settings.plan_cache and n_candidates == 1
        plan = self._plan_cache.get(cache_key) if use_cache else None
        if plan is None:
            decomposition = await self._llm(
                state, "decomposer", nodes.decomposer_messages(state.question, schema, state.history),
                nodes.Decomposition,
            )
            plans = await asyncio.gather(*(
                self._llm(
                    state,
                    "planner",
                    nodes.planner_messages(state.question, schema, dialect, decomposition.sub_queries,
                                           state.history, candidate=(k, n_candidates)),
                    PlanModel,
                )
                for k in range(1, n_candidates + 1)
            ))
            plan = plans[0]
            if n_candidates > 1 and await self._candidates(state, plans, ds_id, adapter, snapshot, access):
                await self._synthesize(state)
                return state.result("success")

        budget = self.config.settings.retry_budget
        kept_same = False
        while True:
            state.plan = plan.to_data()
            state.plans.append(state.plan)
            outcome = await self._timed(
                state,
                "validator",
                lambda p=plan: _validate(
                    p,
                    snapshot,
                    access,
                    state.role,
                    self.refusal_names_tables,
                    self._row_budget(access),
                ),
            )
            if not outcome.ok and outcome.error_code == SECURITY_VIOLATION:
                rule = "table_scope" if outcome.denied_tables else "column_scope"
                raise _Stop(SECURITY_VIOLATION, outcome.message or "", rule)
            error: tuple[str, str] | None = None
            if not outcome.ok:
                error = (outcome.error_code or VALIDATION_ERROR, outcome.message or "the plan is not valid")
            else:
                try:
                    sql = await self._timed(state, "generator", lambda p=plan: _generate(p, dialect, snapshot))
                except ValueError as exc:
                    error = (VALIDATION_ERROR, f"cannot render the plan as SQL: {exc}")
                else:
                    decision = await self._timed(
                        state, "policy", lambda s=sql: self._policy(s, dialect, snapshot, access, state.role, word)
                    )
                    if not decision.allowed and decision.fault == "sql":  # wrong SQL: repair the plan
                        error = (EXECUTION_ERROR, f"the SQL does not run: {decision.detail}")
                    elif not decision.allowed:  # the SQL that would run reads what the role may not
                        raise _Stop(SECURITY_VIOLATION, decision.refusal(self.refusal_names_tables), decision.rule)
                if error is None:
                    state.sql = sql
                    try:
                        rs = await self._timed(
                            state,
                            "executor",
                            lambda s=sql, lim=outcome.limit_applied: execute(
                                adapter, ds_id, s, limit_applied=lim
                            ),
                            thread=True,
                        )
                    except DatasourceError as exc:
                        error = (exc.code, str(exc))
                    else:
                        state.result_sets = [rs]
                        break
            # The plan failed: repair it within the budget.
            assert error is not None
            code, message = error
            state.plan_errors.append(redact(f"{code}: {message}"))
            if kept_same or state.retries >= budget:
                raise _Stop(code, message)
            state.retries += 1
            repair = await self._llm(
                state,
                "refiner",
                nodes.refiner_messages(state.question, schema, dialect, state.plan, code, message, state.history),
                nodes.PlanRepair,
            )
            if repair.keep_same_plan or repair.plan is None:
                kept_same = True
            else:
                plan = repair.plan

        if use_cache:
            self._plan_cache[cache_key] = plan
            self._plan_cache.move_to_end(cache_key)
            while len(self._plan_cache) > PLAN_CACHE_SIZE:
                self._plan_cache.popitem(last=False)
        await self._synthesize(state)
        return state.result("success")

    async def _candidates(self, state: _RunState, plans: Sequence[PlanModel], ds_id: str,
                          adapter: DatasourceAdapter, snapshot: SchemaSnapshot,
                          access: DatasourceAccess | None) -> bool:
        """Try every candidate plan (validate, render, policy check, execute) and keep the one the
        selector chooses; False when every candidate failed (the first then takes the repair path).

        A policy refusal of any candidate stops the run, as it does for a single plan: the
        selector never looks for a plan that gets around the policy."""
        dialect = adapter.dialect
        word = _database_word(adapter)
        outcomes: list[CandidateOutcome] = []
        for index, plan in enumerate(plans):
            started = time.perf_counter()
            run = CandidateRun(index=index, plan=plan.to_data())
            outcome = await self._timed(
                state, "validator",
                lambda p=plan: _validate(p, snapshot, access, state.role, self.refusal_names_tables,
                                         self._row_budget(access)),
            )
            if not outcome.ok and outcome.error_code == SECURITY_VIOLATION:
                rule = "table_scope" if outcome.denied_tables else "column_scope"
                raise _Stop(SECURITY_VIOLATION, outcome.message or "", rule)
            if not outcome.ok:
                run.error_code, run.error_message = outcome.error_code or VALIDATION_ERROR, outcome.message
            else:
                try:
                    sql = await self._timed(state, "generator", lambda p=plan: _generate(p, dialect, snapshot))
                except ValueError as exc:
                    run.error_code, run.error_message = VALIDATION_ERROR, f"cannot render the plan as SQL: {exc}"
                else:
                    decision = await self._timed(
                        state, "policy", lambda s=sql: self._policy(s, dialect, snapshot, access, state.role, word)
                    )
                    if not decision.allowed and decision.fault == "sql":
                        run.error_code, run.error_message = EXECUTION_ERROR, f"the SQL does not run: {decision.detail}"
                    elif not decision.allowed:
                        raise _Stop(SECURITY_VIOLATION, decision.refusal(self.refusal_names_tables), decision.rule)
                    else:
                        run.sql = sql
                        try:
                            run.result_set = await self._timed(
                                state, "executor",
                                lambda s=sql, lim=outcome.limit_applied: execute(adapter, ds_id, s,
                                                                                 limit_applied=lim),
                                thread=True,
                            )
                        except DatasourceError as exc:
                            run.error_code, run.error_message = exc.code, redact(str(exc))
            run.seconds = time.perf_counter() - started
            state.candidates.append(run)
            state.plans.append(run.plan or {})
            outcomes.append(CandidateOutcome(index, run.result_set.rows if run.result_set else None, run.error_code))
        chosen = select_candidate(outcomes)
        if chosen is None:
            state.plans.clear()
            return False
        picked = state.candidates[chosen]
        assert picked.result_set is not None
        state.selected_candidate = chosen
        state.plan = picked.plan
        state.sql = picked.sql
        state.result_sets = [picked.result_set]
        return True

    async def _synthesize(self, state: _RunState) -> None:
        rs = state.result_sets[0]
        out = await self._llm(
            state,
            "synthesizer",
            nodes.synthesizer_messages(state.question, rs.columns, rs.rows, truncated=rs.truncated),
            nodes.SynthesizedAnswer,
        )
        state.answer = Answer(summary=out.summary, content=out.content)

    # ------------------------------------------------------------ curated answers

    async def _curated_answer(self, state: _RunState) -> QueryResult | None:
        """A verified question→SQL pair: the same text first (case, spacing and end punctuation
        aside, no model call), else the curated node's model call judges whether one of the
        verified questions is a paraphrase of the user's.

        Used only when the policy check allows the role to run its SQL; otherwise the question
        takes the generated path, where the validator and the same check decide. A curated SQL
        the role may not run is never executed for it.
        """
        started = time.perf_counter()
        curated = self._curated.get(normalise_question(state.question))
        how: Literal["exact", "paraphrase"] = "exact"
        state.add_time("curated", time.perf_counter() - started)
        if curated is None:
            curated, how = await self._curated_paraphrase(state), "paraphrase"
        if curated is None or curated.datasource not in self.registry:
            return None
        started = time.perf_counter()
        snapshot = await self._snapshot(curated.datasource)
        adapter: DatasourceAdapter = self.registry.get(curated.datasource)
        decision = self._policy(
            curated.sql, adapter.dialect, snapshot, self.role_access(state.role, curated.datasource), state.role,
            _database_word(adapter),
        )
        state.add_time("curated", time.perf_counter() - started)
        if not decision.allowed:
            return None
        state.source = "verified"
        state.curated_match = how
        state.datasources = [curated.datasource]
        state.sql = curated.sql
        try:
            rs = await self._timed(
                state, "executor", lambda: execute(adapter, curated.datasource, curated.sql), thread=True
            )
        except DatasourceError as exc:
            return state.result("error", exc.code, str(exc))
        state.result_sets = [rs]
        await self._synthesize(state)
        return state.result("success")

    async def _curated_paraphrase(self, state: _RunState) -> CuratedAnswer | None:
        """The curated node's call: which verified question (of those sharing most words with
        the user's) asks the same thing, if any."""
        ranked = sorted(self._curated.values(), key=lambda c: -_shared_words(c.question, state.question))
        candidates = ranked[: nodes.CURATED_CANDIDATES]
        if not candidates:
            return None
        out = await self._llm(state, "curated",
                              nodes.curated_messages(state.question, [c.question for c in candidates]),
                              nodes.CuratedMatch)
        if out.match is None or not 1 <= out.match <= len(candidates):
            return None
        return candidates[out.match - 1]


def _shared_words(a: str, b: str) -> int:
    return len(set(normalise_question(a).split()) & set(normalise_question(b).split()))


def _validate(
    plan: PlanModel,
    snapshot: SchemaSnapshot,
    access: DatasourceAccess | None,
    role: str,
    refusal_names_tables: bool,
    row_budget: int | None,
) -> ValidationOutcome:
    return validate_plan(
        plan, snapshot, access, role=role, refusal_names_tables=refusal_names_tables, row_budget=row_budget
    )


def _generate(plan: PlanModel, dialect: str, snapshot: SchemaSnapshot) -> str:
    # Every name made explicit first, so the SQL means one thing to every engine and to the policy.
    return generate_sql(qualify_plan(plan, snapshot), dialect)  # type: ignore[arg-type]


def _database_word(adapter: DatasourceAdapter) -> DatabaseWord | None:
    """A server adapter's own word on a statement it never runs (``statement_reads``), for the
    final-SQL check; None for the file engines, whose word comes from in-memory copies."""
    return getattr(adapter, "statement_reads", None)
