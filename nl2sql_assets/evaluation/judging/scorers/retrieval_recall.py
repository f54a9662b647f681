"""retrieval_recall: did the schema retriever send every table and column the case needs?

A column never sent is one the planner cannot use, so a case passes only at full table
and column recall; the value is the column recall so partial progress still shows.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel

from nl2sql_assets.evaluation.judging.scorers.base import CaseRun, NoConfig, Score


def recall_detail(needed_tables: list[str], needed_columns: list[str], sent: dict[str, list[str]]) -> dict:
    """Table and column recall of ``sent`` (table -> columns) against the needed names;
    names compare without regard to case, as SQLite and DuckDB resolve them."""
    sent_tables = {t.lower() for t in sent}
    sent_columns = {f"{t}.{c}".lower() for t, cols in sent.items() for c in cols}
    missed_tables = [t for t in needed_tables if t.lower() not in sent_tables]
    missed_columns = [c for c in needed_columns if c.lower() not in sent_columns]
    table_recall = 1.0 if not needed_tables else 1 - len(missed_tables) / len(needed_tables)
    column_recall = 1.0 if not needed_columns else 1 - len(missed_columns) / len(needed_columns)
    return {
        "table_recall": table_recall,
        "column_recall": column_recall,
        "missed_tables": missed_tables,
        "missed_columns": missed_columns,
        "tables_sent": len(sent),
        "columns_sent": sum(len(cols) for cols in sent.values()),
    }


class RetrievalRecall:
    interface_version: ClassVar[int] = 1
    config_model: ClassVar[type[BaseModel]] = NoConfig
    modes: ClassVar[frozenset[str]] = frozenset({"full", "retrieval"})

    @classmethod
    def from_config(cls, cfg: BaseModel) -> RetrievalRecall:
        return cls()

    def score(self, run: CaseRun) -> Score:
        case = run.case
        if run.expected != "allowed" or not case.tables or run.retrieval is None:
            return Score()
        detail = recall_detail(case.tables, case.columns, run.retrieval)
        passed = detail["table_recall"] == 1.0 and detail["column_recall"] == 1.0
        if not passed:
            missed = detail["missed_tables"] + [
                c for c in detail["missed_columns"] if c.split(".", 1)[0] not in detail["missed_tables"]
            ]
            detail["reason"] = "missed_tables" if detail["missed_tables"] else "missed_columns"
            detail["message"] = "retriever did not send " + ", ".join(missed)
        return Score(value=detail["column_recall"], passed=passed, detail=detail)
