"""CaseRecord: the compact, JSON-safe verdict on one case run (what boards, the gate and records read).

Records keep verdicts, reasons, hashes, cost and latency, never whole result sets: the
rows are summarised by ``rows_sha256`` and ``row_count`` so determinism can be checked
across passes without storing data.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from nl2sql_assets.evaluation.judging.scorers import Score, Verdict
from nl2sql_assets.evaluation.running.modes import ModeName
from nl2sql_assets.llm.calls import Usage


class CaseRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    suite: str
    case_id: str
    role: str
    config: str
    mode: ModeName
    pass_index: int = 1
    expected: str

    status: Verdict  # every applicable scorer passed
    lenient_status: Verdict | None = None  # as status, with result_match read leniently
    execution_status: Verdict | None = None  # result_match and outcome only; None for routing cases
    reason: str = ""  # the first failing scorer's reason
    scores: dict[str, Score] = Field(default_factory=dict)

    result_status: str | None = None  # the QueryResult's status
    error_code: str | None = None
    error_message: str | None = None
    sql: str | None = None
    plan: dict[str, Any] | None = None
    answer: str | None = None
    datasources: list[str] = Field(default_factory=list)
    columns: list[str] = Field(default_factory=list)
    row_count: int | None = None
    rows_sha256: str | None = None
    source: Literal["generated", "verified"] = "generated"
    generated: CaseRecord | None = None  # the curated-off rerun of a verified answer

    tags: list[str] = Field(default_factory=list)
    difficulty: str | None = None
    models: dict[str, str] = Field(default_factory=dict)  # node -> provider/model
    usage: dict[str, Usage] = Field(default_factory=dict)  # node -> tokens
    cost_usd: float | None = None  # None when some call could not be priced
    unknown_cost_calls: int = 0
    latency_s: float = 0.0
    timings: dict[str, float] = Field(default_factory=dict)
    retries: int = 0
    faithfulness: dict[str, Any] | None = None
    retrieval: dict[str, Any] | None = None
    routed: list[str] | None = None
