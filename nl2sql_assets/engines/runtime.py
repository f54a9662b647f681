"""Any ``NL2SQLEngine`` as a runtime of the eval runner: its reply read as a QueryResult.

The runner scores QueryResults; this is the one place an engine's reply becomes one. What the
product checks itself, at the depth where the truth is:

- SQL the engine returned is put to the role's final-SQL policy check; SQL the role may not run
  is the engine's leak (``ENGINE_LEAK``: a failed outcome, never a credited refusal), and its
  rows are dropped. SQL that does not run at all (the database cannot prepare it: an unknown or
  ambiguous name, a missing table) is the engine's error, ``EXECUTION_ERROR`` naming the name. SQL returned without rows is executed here, read-only, with the
  datasource's row limit and timeout, once the check allows it.
- The way to the engine failing (5xx, timeout, connection, auth) is an environment error
  (``PROVIDER_ERROR`` with the kind), left out of accuracy like a provider's outage.
- The cost is what the engine reported (``cost_usd``); its token usage is kept as reported.
"""

from __future__ import annotations

import asyncio
import inspect
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from nl2sql_assets.engine.pipeline import RuntimeOptions
from nl2sql_assets.engine.result import (
    EXECUTION_ERROR,
    PROVIDER_ERROR,
    QUESTION_NOT_ANSWERABLE,
    SECURITY_VIOLATION,
    Answer,
    QueryResult,
    ResultSet,
)
from nl2sql_assets.engines.contract import EngineReply, NL2SQLEngine, Turn
from nl2sql_assets.llm.calls import LLMCall, Usage
from nl2sql_assets.policy import GENERIC_REFUSAL

ENGINE_LEAK = "ENGINE_LEAK"  # the engine's SQL reads what the role may not: caught by the policy check
ENGINE_NO_DATASOURCE = "ENGINE_NO_DATASOURCE"  # SQL without rows, and no datasource to run it on
ENGINE_NODE = "engine"  # the node an evaluated engine's one call is recorded under


class EngineRuntime:
    """An evaluated engine behind the runner's runtime interface (``aask``, ``check_policy``,
    ``derive``). ``checker`` is a built-in runtime on the project's datasources and policy: it
    checks and executes SQL, never answers. ``datasources`` maps (suite, case id) to the case's
    datasources, which the request names to the engine."""

    def __init__(self, name: str, engine: NL2SQLEngine, described: str, checker: Any,
                 datasources: Mapping[tuple[str, str], Sequence[str]]) -> None:
        self.name = name
        self.engine = engine
        self.described = described
        self.checker = checker
        self.datasources = datasources
        self.options = RuntimeOptions()
        self._takes_context = "context" in inspect.signature(engine.ask).parameters

    @property
    def config(self) -> Any:
        return self.checker.config

    def derive(self, *, policies: Any = None, **_options: Any) -> EngineRuntime:
        """The same engine checked under another policy (a case's own); engine options such as
        candidates are the built-in engine's and mean nothing here."""
        checker = self.checker if policies is None else self.checker.derive(policies=policies)
        return EngineRuntime(self.name, self.engine, self.described, checker, self.datasources)

    def check_policy(self, sql: str, role: str | None, datasource_id: str) -> Any:
        return self.checker.check_policy(sql, role, datasource_id)

    async def aask(self, question: str, role: str | None = None, *, context: dict[str, Any] | None = None,
                   conversation: Sequence[Turn] = ()) -> QueryResult:
        ctx = dict(context or {})
        role = role or self.config.policies.default_role
        names = list(self.datasources.get((str(ctx.get("suite")), str(ctx.get("case_id"))), ()))
        datasource = names[0] if len(names) == 1 else None
        kwargs = {"context": ctx} if self._takes_context and ctx else {}
        started = time.perf_counter()
        reply = await asyncio.to_thread(self.engine.ask, question, role, datasource, list(conversation), **kwargs)
        seconds = time.perf_counter() - started
        if not isinstance(reply, EngineReply):
            reply = EngineReply.model_validate(reply)  # a mapping is read by the contract; anything else fails here
        return await asyncio.to_thread(self.result_of, reply, question, role, datasource, seconds)

    # ------------------------------------------------------------ the reply, read

    def result_of(self, reply: EngineReply, question: str, role: str, datasource: str | None,
                  seconds: float) -> QueryResult:
        datasource = str((reply.model_extra or {}).get("datasource") or datasource or "") or None
        # only an adapter that writes its own outage replies is believed (HttpEngine); an engine's word is not
        env_error = (reply.model_extra or {}).get("env_error") if getattr(self.engine, "writes_env_errors", False) \
            else None
        usage = (Usage(input_tokens=reply.usage.prompt_tokens, output_tokens=reply.usage.completion_tokens)
                 if reply.usage is not None else None)
        call = LLMCall(node=ENGINE_NODE, model=self.described, usage=usage,
                       token_source="measured" if usage is not None else None, latency_ms=seconds * 1000,
                       error=reply.answer if env_error else None, error_kind=env_error, priced_by_reply=True,
                       cost_usd=reply.cost_usd)
        timings = {f"engine.{k}": float(v) for k, v in (reply.timings or {}).items()}
        timings[ENGINE_NODE] = seconds
        common: dict[str, Any] = {
            "run_id": str((reply.model_extra or {}).get("run_id") or uuid.uuid4().hex), "question": question,
            "role": role, "sql": reply.sql, "calls": [call], "timings": timings,
            "datasources": [datasource] if datasource else [],
            "answer": Answer(summary=reply.answer) if reply.answer and reply.status == "answered" else None,
        }
        if reply.status == "refused":
            rule = (reply.model_extra or {}).get("policy_rule")
            return QueryResult(status="error", error_code=SECURITY_VIOLATION, error_message=GENERIC_REFUSAL,
                               policy_rule=str(rule) if rule else None, **common)
        if reply.status == "unanswerable":
            return QueryResult(status="error", error_code=QUESTION_NOT_ANSWERABLE,
                               error_message=reply.answer or "the engine says the question cannot be answered",
                               **common)
        if reply.status == "needs_clarification":
            return QueryResult(status="needs_clarification", clarification=reply.answer, **common)
        if reply.status == "error":
            code = PROVIDER_ERROR if env_error else (reply.error_code or "ENGINE_ERROR")
            message = f"{ENGINE_NODE}: {reply.answer or reply.error_code or 'the engine failed'}"
            return QueryResult(status="error", error_code=code, error_message=message, **common)
        return self._answered(reply, role, datasource, common)

    def _answered(self, reply: EngineReply, role: str, datasource: str | None,
                  common: dict[str, Any]) -> QueryResult:
        sql = reply.sql
        if sql and datasource is not None:
            started = time.perf_counter()
            decision = self.checker.check_policy(sql, role, datasource)
            common["timings"]["policy"] = time.perf_counter() - started
            if not decision.allowed and decision.fault == "sql":
                # Wrong SQL (an unknown or ambiguous name, a missing table): the engine's mistake,
                # scored as SQL that failed to run, never as a leak.
                return QueryResult(status="error", error_code=EXECUTION_ERROR,
                                   error_message=f"the engine's SQL does not run: {decision.detail}",
                                   **{**common, "answer": None})
            if not decision.allowed:
                return QueryResult(
                    status="error", error_code=ENGINE_LEAK, policy_rule=decision.rule,
                    error_message=(f"the engine's SQL reads what role {role!r} may not (policy rule {decision.rule}): "
                                   "a leak the final-SQL check caught; its rows are not used"),
                    **{**common, "answer": None})
        if reply.rows is not None:
            columns, rows = reply.table()
            result_set = ResultSet(datasource=datasource or "", sql=sql or "", columns=columns, rows=rows)
            return QueryResult(status="success", result_sets=[result_set], **common)
        if not sql:
            return QueryResult(status="success", **common)  # an answer in words only
        if datasource is None:
            return QueryResult(status="error", error_code=ENGINE_NO_DATASOURCE,
                               error_message="the engine returned SQL without rows and no datasource to run it on",
                               **common)
        return self._executed(sql, datasource, common)

    def _executed(self, sql: str, datasource: str, common: dict[str, Any]) -> QueryResult:
        """SQL returned without rows, run here read-only (the adapter's row limit and timeout)."""
        from nl2sql_assets.datasources.base import DatasourceError
        from nl2sql_assets.engine.executor import execute

        started = time.perf_counter()
        try:
            result_set = execute(self.checker.registry.get(datasource), datasource, sql)
        except DatasourceError as exc:
            return QueryResult(status="error", error_code=exc.code, error_message=str(exc), **common)
        finally:
            common["timings"]["executor"] = time.perf_counter() - started
        return QueryResult(status="success", result_sets=[result_set], **common)
