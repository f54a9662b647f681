"""The built-in reference engine behind the engine contract: its QueryResult read as an EngineReply."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nl2sql_assets.engine.result import QUESTION_NOT_ANSWERABLE, SECURITY_VIOLATION, QueryResult
from nl2sql_assets.engines.contract import EngineReply, TokenUsage, Turn


def reply_from_result(result: QueryResult) -> EngineReply:
    """The contract's reading of one QueryResult: refusals and unanswerable questions are outcomes,
    not errors; rows become mappings; usage is summed over the calls (None when none reported)."""
    if result.status == "success":
        status = "answered"
    elif result.status == "needs_clarification":
        status = "needs_clarification"
    elif result.error_code == SECURITY_VIOLATION:
        status = "refused"
    elif result.error_code == QUESTION_NOT_ANSWERABLE:
        status = "unanswerable"
    else:
        status = "error"
    rows: list[Any] | None = None
    columns: list[str] | None = None
    if result.result_sets:
        columns = list(result.result_sets[0].columns)
        if len(set(columns)) == len(columns):
            rows = [dict(zip(columns, row, strict=True)) for row in result.result_sets[0].rows]
        else:  # two columns of one name: arrays keep both
            rows = [list(row) for row in result.result_sets[0].rows]
    reported = [c.usage for c in result.calls if c.usage is not None]
    usage = None
    if reported:
        usage = TokenUsage(prompt_tokens=sum(u.input_tokens for u in reported),
                           completion_tokens=sum(u.output_tokens for u in reported))
    costs = [getattr(c, "cost_usd", None) for c in result.calls]
    cost = sum(costs) if costs and all(c is not None for c in costs) else None
    return EngineReply(status=status, sql=result.sql, rows=rows, columns=columns,
                       answer=result.answer.summary if result.answer is not None else None,
                       error_code=result.error_code if status == "error" else None, usage=usage, cost_usd=cost,
                       timings=dict(result.timings) or None, run_id=result.run_id, policy_rule=result.policy_rule)


class BuiltinEngine:
    """``nl2sql_assets.engine.Engine`` as an ``NL2SQLEngine``. It routes questions itself: a
    ``datasource`` given is passed on in the run's context, not imposed."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def ask(self, question: str, role: str, datasource: str | None = None,
            conversation: Sequence[Turn] | None = None, context: dict[str, Any] | None = None) -> EngineReply:
        ctx = dict(context or {})
        if datasource is not None:
            ctx.setdefault("datasource", datasource)
        return reply_from_result(self.engine.ask(question, role, context=ctx or None,
                                                 conversation=tuple(conversation or ())))
