"""retrieval_recall: did the schema retriever send every table and column the case needs?

A column never sent is one the planner cannot use, so a case passes only at full table
and column recall; the value is the column recall so partial progress still shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import BaseModel, Field

from nl2sql_assets.config import StrictModel
from nl2sql_assets.evaluation.judging.scorers.base import CaseRun, NoConfig, Score, Scored, ScorerSummary
from nl2sql_assets.evaluation.judging.stats import percent


class RecallDetail(StrictModel):
    """One case run's recall, and how much the retriever sent to get it."""

    table_recall: float = 0.0
    column_recall: float = 0.0
    missed_tables: list[str] = Field(default_factory=list)
    missed_columns: list[str] = Field(default_factory=list)
    tables_sent: int = 0
    columns_sent: int = 0
    reason: str | None = None
    message: str | None = None


class RetrievalSummary(ScorerSummary):
    """Mean recall over the case runs scored, how many had every table and every column, and how
    much was sent on average (recall is read beside what it cost in context)."""

    cases: int
    table_recall: float
    column_recall: float
    perfect_tables: int
    perfect_columns: int
    tables_sent: float
    columns_sent: float

    def metrics(self) -> dict[str, float]:
        return {"table_recall": self.table_recall, "column_recall": self.column_recall,
                "perfect_tables": self.perfect_tables, "perfect_columns": self.perfect_columns,
                "tables_sent": self.tables_sent, "columns_sent": self.columns_sent}

    def markdown(self) -> str:
        return (f"Retrieval: table recall {percent(self.table_recall)}, column recall "
                f"{percent(self.column_recall)} (every table {self.perfect_tables} of {self.cases}, every column "
                f"{self.perfect_columns} of {self.cases}); sent {self.tables_sent:.1f} tables and "
                f"{self.columns_sent:.1f} columns on average.")

    def text(self) -> str:
        return (f"table recall {self.table_recall:.1%}, column recall {self.column_recall:.1%} "
                f"(every table {self.perfect_tables}/{self.cases}, every column {self.perfect_columns}/{self.cases}; "
                f"sent {self.tables_sent:.1f} tables, {self.columns_sent:.1f} columns on average)")

    def cell(self) -> str:
        return (f"tables {percent(self.table_recall)}, columns {percent(self.column_recall)} "
                f"({self.tables_sent:.1f} / {self.columns_sent:.1f} sent)")


def recall_detail(needed_tables: list[str], needed_columns: list[str], sent: dict[str, list[str]]) -> RecallDetail:
    """Table and column recall of ``sent`` (table -> columns) against the needed names;
    names compare without regard to case, as SQLite and DuckDB resolve them."""
    sent_tables = {t.lower() for t in sent}
    sent_columns = {f"{t}.{c}".lower() for t, cols in sent.items() for c in cols}
    missed_tables = [t for t in needed_tables if t.lower() not in sent_tables]
    missed_columns = [c for c in needed_columns if c.lower() not in sent_columns]
    table_recall = 1.0 if not needed_tables else 1 - len(missed_tables) / len(needed_tables)
    column_recall = 1.0 if not needed_columns else 1 - len(missed_columns) / len(needed_columns)
    return RecallDetail(
        table_recall=table_recall,
        column_recall=column_recall,
        missed_tables=missed_tables,
        missed_columns=missed_columns,
        tables_sent=len(sent),
        columns_sent=sum(len(cols) for cols in sent.values()),
    )


class RetrievalRecall:
    interface_version: ClassVar[int] = 1
    config_model: ClassVar[type[BaseModel]] = NoConfig
    detail_model: ClassVar[type[BaseModel]] = RecallDetail
    summary_model: ClassVar[type[ScorerSummary]] = RetrievalSummary
    modes: ClassVar[frozenset[str]] = frozenset({"full", "retrieval"})

    @classmethod
    def from_config(cls, cfg: BaseModel) -> RetrievalRecall:
        return cls()

    def score(self, run: CaseRun) -> Score:
        case = run.case
        if run.expected != "allowed" or not case.tables or run.retrieval is None:
            return Score()
        detail = recall_detail(case.tables, case.columns, run.retrieval)
        passed = detail.table_recall == 1.0 and detail.column_recall == 1.0
        if not passed:
            missed = detail.missed_tables + [
                c for c in detail.missed_columns if c.split(".", 1)[0] not in detail.missed_tables
            ]
            detail.reason = "missed_tables" if detail.missed_tables else "missed_columns"
            detail.message = "retriever did not send " + ", ".join(missed)
        return Score(value=detail.column_recall, passed=passed, detail=detail.model_dump(exclude_none=True))

    @classmethod
    def summarize(cls, scores: Sequence[Scored]) -> RetrievalSummary | None:
        details: list[RecallDetail] = []
        for s in scores:
            if s.score.passed is None or not {"table_recall", "column_recall"} & set(s.score.detail):
                continue
            details.append(RecallDetail.model_validate(s.score.detail))
        if not details:
            return None
        n = len(details)
        return RetrievalSummary(
            cases=n,
            table_recall=sum(d.table_recall for d in details) / n,
            column_recall=sum(d.column_recall for d in details) / n,
            perfect_tables=sum(1 for d in details if d.table_recall >= 1.0),
            perfect_columns=sum(1 for d in details if d.column_recall >= 1.0),
            tables_sent=sum(d.tables_sent for d in details) / n,
            columns_sent=sum(d.columns_sent for d in details) / n,
        )
