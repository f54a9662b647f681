"""QueryResult: everything one question produced, for a caller and for the scorers."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from nl2sql_assets.config import StrictModel
from nl2sql_assets.llm.calls import LLMCall, Usage  # the LLM client's value types, kept in a result

Status = Literal["success", "error", "needs_clarification"]
Source = Literal["generated", "verified"]

# Error codes a QueryResult may carry.
SECURITY_VIOLATION = "SECURITY_VIOLATION"
QUESTION_NOT_ANSWERABLE = "QUESTION_NOT_ANSWERABLE"
VALIDATION_ERROR = "VALIDATION_ERROR"
EXECUTION_ERROR = "EXECUTION_ERROR"
TIMEOUT = "TIMEOUT"
READ_ONLY_VIOLATION = "READ_ONLY_VIOLATION"
LLM_ERROR = "LLM_ERROR"  # the model's answer was unusable (unparsable, not the schema)
#: the provider or the way to it failed (auth, quota, rate limit, 5xx, timeout, transport): an
#: outage, never the model's mistake; the failed call's ``error_kind`` says which
PROVIDER_ERROR = "PROVIDER_ERROR"
ROW_BUDGET_EXCEEDED = "ROW_BUDGET_EXCEEDED"


class ResultSet(StrictModel):
    datasource: str
    sql: str
    columns: list[str]
    rows: list[list[Any]]
    truncated: bool = False


class Answer(StrictModel):
    summary: str
    content: str = ""


class CandidateRun(StrictModel):
    """One of N candidate plans a run tried (``settings.candidates``): what it returned, or why
    it was dropped, and the seconds it took to validate and execute."""

    index: int
    plan: dict[str, Any] | None = None
    sql: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    result_set: ResultSet | None = None
    seconds: float = 0.0


class QueryResult(StrictModel):
    run_id: str
    question: str
    role: str
    status: Status
    error_code: str | None = None
    error_message: str | None = None
    #: the policy rule that refused (a SECURITY_VIOLATION); the message stays the generic one
    policy_rule: str | None = None
    result_sets: list[ResultSet] = Field(default_factory=list)
    sql: str | None = None
    plan: dict[str, Any] | None = None
    plans: list[dict[str, Any]] = Field(default_factory=list)  # every plan tried, in order
    plan_errors: list[str] = Field(default_factory=list)  # why each failed plan failed (the first ones)
    answer: Answer | None = None
    clarification: str | None = None  # the question asked back (status needs_clarification)
    datasources: list[str] = Field(default_factory=list)
    retrieval: dict[str, list[str]] | None = None  # table -> columns the retriever sent
    routing: list[str] | None = None  # datasources ranked best first
    calls: list[LLMCall] = Field(default_factory=list)
    timings: dict[str, float] = Field(default_factory=dict)  # seconds per node
    retries: int = 0
    source: Source = "generated"
    #: the candidate plans tried, in the order the planner wrote them (empty: one plan, no selection)
    candidates: list[CandidateRun] = Field(default_factory=list)
    #: which of ``candidates`` the selector chose (None: no selection, or every candidate failed)
    selected_candidate: int | None = None
    #: how a verified answer was found: the same text, or the curated node judged a paraphrase
    curated_match: Literal["exact", "paraphrase"] | None = None

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
