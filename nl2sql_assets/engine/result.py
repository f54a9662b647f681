"""QueryResult: everything one question produced, for a caller and for the scorers."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["success", "error", "needs_clarification"]
Source = Literal["generated", "verified"]

# Error codes a QueryResult may carry.
SECURITY_VIOLATION = "SECURITY_VIOLATION"
QUESTION_NOT_ANSWERABLE = "QUESTION_NOT_ANSWERABLE"
VALIDATION_ERROR = "VALIDATION_ERROR"
EXECUTION_ERROR = "EXECUTION_ERROR"
TIMEOUT = "TIMEOUT"
READ_ONLY_VIOLATION = "READ_ONLY_VIOLATION"
LLM_ERROR = "LLM_ERROR"
ROW_BUDGET_EXCEEDED = "ROW_BUDGET_EXCEEDED"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Usage(_Model):
    """Token counts as the provider reported them. Reasoning tokens are part of output."""

    input_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(**{k: getattr(self, k) + getattr(other, k) for k in Usage.model_fields})


class LLMCall(_Model):
    """One model call: which node made it, with which configured model, what it used and took."""

    node: str
    model: str
    usage: Usage | None = None  # None when the provider reported nothing (a failed call)
    latency_ms: float = 0.0
    attempts: int = 1
    error: str | None = None


class ResultSet(_Model):
    datasource: str
    sql: str
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool = False


class Answer(_Model):
    summary: str
    content: str = ""


class QueryResult(_Model):
    run_id: str
    question: str
    role: str
    status: Status
    error_code: str | None = None
    error_message: str | None = None
    result_sets: list[ResultSet] = Field(default_factory=list)
    sql: str | None = None
    plan: dict[str, Any] | None = None
    plans: list[dict[str, Any]] = Field(default_factory=list)
    answer: Answer | None = None
    datasources: list[str] = Field(default_factory=list)
    retrieval: dict[str, list[str]] | None = None  # table -> columns the retriever sent
    routing: list[str] | None = None  # datasources ranked best first
    calls: list[LLMCall] = Field(default_factory=list)
    timings: dict[str, float] = Field(default_factory=dict)  # seconds per node
    retries: int = 0
    source: Source = "generated"

    @property
    def usage(self) -> dict[str, Usage]:
        """Tokens summed per node."""
        out: dict[str, Usage] = {}
        for call in self.calls:
            if call.usage is not None:
                out[call.node] = out.get(call.node, Usage()) + call.usage
        return out

    @property
    def rows(self) -> list[list[Any]] | None:
        return self.result_sets[0].rows if self.result_sets else None

    @property
    def columns(self) -> list[str]:
        return self.result_sets[0].columns if self.result_sets else []
