"""The engine contract: what the evaluator asks any NL2SQL engine and what it takes back.

``NL2SQLEngine.ask(question, role, datasource, conversation) -> EngineReply`` is the one call;
the built-in engine is one implementation (``engines.builtin``), an engine behind HTTP another
(``engines.http_client``). The JSON form of ``AskRequest`` and ``EngineReply`` is the HTTP contract
(docs/engine-api.openapi.yaml): small enough that a team writes a server for it in minutes.
A reply may carry fields of its own: they are allowed and kept (``model_extra``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator

from nl2sql_assets.config import StrictModel
from nl2sql_assets.engine.conversation import Turn  # one earlier turn: question, sql, answer

ReplyStatus = Literal["answered", "refused", "unanswerable", "needs_clarification", "error"]


class AskRequest(StrictModel):
    """``POST /ask``'s body. ``context`` is optional and only for engines that want it (the
    reference server hands it to the built-in engine's run, e.g. a case id)."""

    question: str = Field(min_length=1)
    role: str = Field(min_length=1)
    datasource: str | None = None
    conversation: list[Turn] = Field(default_factory=list)
    context: dict[str, Any] | None = None


class TokenUsage(StrictModel):
    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)


class EngineReply(BaseModel):
    """What an engine answered. ``rows`` are mappings column -> value, or arrays of values in
    ``columns`` order (the form that holds a result with two columns of one name, such as
    ``T1.id, T2.id``); None: the engine ran no SQL, or returned SQL only. ``usage`` and
    ``cost_usd`` are None when the engine does not know."""

    model_config = ConfigDict(extra="allow")  # an engine's own fields are kept, never refused

    status: ReplyStatus
    sql: str | None = None
    rows: list[dict[str, Any]] | list[list[Any]] | None = None
    #: the result's column names in order; required when ``rows`` are arrays
    columns: list[str] | None = None
    answer: str | None = None
    error_code: str | None = None
    usage: TokenUsage | None = None
    cost_usd: float | None = Field(default=None, ge=0)
    timings: dict[str, float] | None = None  # seconds, by step (the caller adds its own wall time)

    @model_validator(mode="after")
    def _rows_fit_columns(self) -> EngineReply:
        if not self.rows:
            return self
        if isinstance(self.rows[0], list):
            if self.columns is None:
                raise ValueError("rows: arrays of values need 'columns' (the names, in order)")
            bad = next((i for i, r in enumerate(self.rows) if len(r) != len(self.columns)), None)
            if bad is not None:
                raise ValueError(f"rows[{bad}]: {len(self.rows[bad])} values for {len(self.columns)} columns")
        elif self.columns is not None and len(set(self.columns)) != len(self.columns):
            raise ValueError("columns: names repeat, which rows as mappings cannot hold; send rows as arrays")
        return self

    def table(self) -> tuple[list[str], list[list[Any]]]:
        """(columns, rows as value lists in column order) of the rows this reply carries."""
        rows = self.rows or []
        if rows and isinstance(rows[0], list):
            return list(self.columns or []), [list(r) for r in rows]
        columns = list(self.columns) if self.columns is not None else (
            list(rows[0]) if rows else list((self.model_extra or {}).get("columns") or []))
        return columns, [[row.get(c) for c in columns] for row in rows]  # type: ignore[union-attr]


@runtime_checkable
class NL2SQLEngine(Protocol):
    """Any engine the evaluator can run."""

    def ask(self, question: str, role: str, datasource: str | None = None,
            conversation: Sequence[Turn] | None = None) -> EngineReply: ...
