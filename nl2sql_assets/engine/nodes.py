"""The LLM nodes' structured outputs and prompts.

Each output model's class name is the JSON-schema name sent with the call, so the gold LLM
(and any log reader) can tell the nodes apart by it: keep the names stable. Prompts are short
and plain; the output schema itself travels as the call's ``response_format``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from nl2sql_assets.datasources.schema import SchemaSnapshot
from nl2sql_assets.engine.plan import PlanModel


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DatasourceSelection(_Out):
    """Resolver: which datasources can answer, best first; ``answerable`` false when none can;
    ``needs_clarification`` when the question could mean several things and one must be chosen
    before any SQL is written (``clarification`` is the question to ask back)."""

    datasources: list[str] = Field(default_factory=list)
    answerable: bool
    reason: str = ""
    needs_clarification: bool = False
    clarification: str = ""


class CuratedMatch(_Out):
    """Curated: the number of the verified question that asks the same thing as the user's
    (1-based, as listed), or None when none does."""

    match: int | None = None
    reason: str = ""


class SubQuery(_Out):
    question: str
    expected_columns: list[str] = Field(default_factory=list)


class Decomposition(_Out):
    """Decomposer: the question split into the parts the plan must cover."""

    sub_queries: list[SubQuery] = Field(default_factory=list)


class PlanRepair(_Out):
    """Refiner: a corrected plan, or ``keep_same_plan`` when the failure was not the plan's fault."""

    keep_same_plan: bool
    plan: PlanModel | None = None
    reason: str = ""


class SynthesizedAnswer(_Out):
    """Synthesizer: a one-line summary and a short answer, both from the rows only."""

    summary: str
    content: str = ""


#: The synthesizer sees at most this many rows (the result set keeps them all).
SYNTHESIZER_MAX_ROWS = 50


# ---------------------------------------------------------------- schema context


def schema_text(snapshot: SchemaSnapshot, selection: Mapping[str, Sequence[str]] | None = None) -> str:
    """The schema as the planner reads it: each table with its columns, types and keys, and the
    database's own comments on them where it keeps any (a server's catalog).

    ``selection`` (table → columns, from a retriever) narrows it; None sends everything.
    """
    wanted = (
        None if selection is None else {t.lower(): {c.lower() for c in cols} for t, cols in selection.items()}
    )
    lines: list[str] = []
    for table in snapshot.tables:
        if wanted is not None and table.name.lower() not in wanted:
            continue
        keep = None if wanted is None else wanted[table.name.lower()]
        pk = f" (primary key: {', '.join(table.primary_key)})" if table.primary_key else ""
        note = f" -- {' '.join(table.description.split())}" if table.description else ""
        lines.append(f"table {table.name}{pk}{note}")
        refs = {}
        for fk in table.foreign_keys:
            for col, ref in zip(fk.columns, fk.ref_columns, strict=False):
                refs[col.lower()] = f"{fk.ref_table}.{ref}"
        for col in table.columns:
            if keep is not None and col.name.lower() not in keep:
                continue
            extra = " not null" if not col.nullable else ""
            ref = refs.get(col.name.lower())
            ref_text = f" -> {ref}" if ref else ""
            note = f" -- {' '.join(col.description.split())}" if col.description else ""
            lines.append(f"  {col.name} {col.type or 'ANY'}{extra}{ref_text}{note}")
    return "\n".join(lines)


def datasource_line(ds_id: str, description: str, snapshot: SchemaSnapshot | None) -> str:
    tables = ", ".join(snapshot.table_names) if snapshot is not None else "(schema unavailable)"
    desc = f": {description}" if description else ""
    return f"- {ds_id}{desc}\n  tables: {tables}"


# ---------------------------------------------------------------- prompts


def _msgs(system: str, user: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


RESOLVER_SYSTEM = (
    "You route questions to databases. Given a question and the datasources available, return "
    "the ids of the datasources that hold the data to answer it, best first. If none of them "
    "can answer it (the data is not there, or it is not a question about the data), return an "
    "empty list and answerable=false, with a one-sentence reason. If the data is there but the "
    "question is ambiguous (it could mean several different queries and guessing would mislead), "
    "set needs_clarification=true and put the one question you would ask back in clarification."
)


def _with_history(history: str, question: str) -> str:
    """The question, after the earlier turns of its conversation when it has any."""
    return (f"{history}\n\n" if history else "") + f"Question: {question}"


def resolver_messages(question: str, datasource_lines: Sequence[str], history: str = "") -> list[dict[str, Any]]:
    user = "Datasources:\n" + "\n".join(datasource_lines) + "\n\n" + _with_history(history, question)
    return _msgs(RESOLVER_SYSTEM, user)


CURATED_SYSTEM = (
    "You decide whether a user's question asks exactly the same thing as one of a numbered list of "
    "verified questions, only worded differently. Same thing means the same data, filters, grouping "
    "and order: a verified answer to it would answer the user's question fully and nothing more. "
    "Return its number in match, or null when none asks the same thing (a near miss is null)."
)
CURATED_CANDIDATES = 20  # the verified questions shown to the curated node, most words in common first


def curated_messages(question: str, candidates: Sequence[str]) -> list[dict[str, Any]]:
    listed = "\n".join(f"{n}. {text}" for n, text in enumerate(candidates, start=1))
    return _msgs(CURATED_SYSTEM, f"Verified questions:\n{listed}\n\nQuestion: {question}")


def curated_question_of(user_message: str, number: int) -> str | None:
    """The verified question listed as ``number`` in a curated node's user message."""
    prefix = f"{number}. "
    for line in user_message.splitlines():
        if line.startswith(prefix):
            return line[len(prefix):]
    return None


DECOMPOSER_SYSTEM = (
    "You break a database question into the parts a single SQL query must cover: filters, "
    "groupings, measures and ordering. Return one sub-query per part (usually one or two), each "
    "with the output columns it expects, named as the answer should name them."
)


def decomposer_messages(question: str, schema: str, history: str = "") -> list[dict[str, Any]]:
    return _msgs(DECOMPOSER_SYSTEM, f"Schema:\n{schema}\n\n" + _with_history(history, question))


PLANNER_SYSTEM = (
    "You write one read-only query for a question as a PlanModel: a JSON query tree, never SQL "
    "text. Use only the tables and columns in the schema, and qualify columns with their table "
    "alias when more than one table is involved. Each expression has a 'kind' (literal, column, "
    "function, binary, unary, in_list, between, case, cast, date_part, exists, in_subquery, "
    "scalar_subquery). Select exactly the columns the question asks for, with short aliases; "
    "add order_by when the question implies an order and limit when it asks for the top N."
)


#: How the planner is told which of N candidate plans it writes (the gold LLM reads it back).
CANDIDATE_NOTE = "This is candidate plan {index} of {count}: write a valid plan that may differ from the others."


def planner_messages(
    question: str, schema: str, dialect: str, sub_queries: Sequence[SubQuery] = (), history: str = "",
    candidate: tuple[int, int] | None = None,
) -> list[dict[str, Any]]:
    parts = [f"Database dialect: {dialect}", f"Schema:\n{schema}"]
    if sub_queries:
        lines = [
            f"- {sq.question}"
            + (f" (columns: {', '.join(sq.expected_columns)})" if sq.expected_columns else "")
            for sq in sub_queries
        ]
        parts.append("Parts to cover:\n" + "\n".join(lines))
    parts.append(_with_history(history, question))
    if candidate is not None and candidate[1] > 1:
        parts.append(CANDIDATE_NOTE.format(index=candidate[0], count=candidate[1]))
    return _msgs(PLANNER_SYSTEM, "\n\n".join(parts))


REFINER_SYSTEM = (
    "You repair a query plan (PlanModel JSON) that failed validation or execution. Read the error, "
    "fix the plan so it answers the question with the schema given, and return it in 'plan' with "
    "keep_same_plan=false. If the error was not caused by the plan (for example a transient "
    "database failure), return keep_same_plan=true and no plan."
)


def refiner_messages(
    question: str, schema: str, dialect: str, plan: dict[str, Any], error_code: str, error_message: str,
    history: str = "",
) -> list[dict[str, Any]]:
    user = (
        f"Database dialect: {dialect}\n\nSchema:\n{schema}\n\n{_with_history(history, question)}\n\n"
        f"Failed plan:\n{json.dumps(plan, ensure_ascii=False)}\n\nError ({error_code}): {error_message}"
    )
    return _msgs(REFINER_SYSTEM, user)


SYNTHESIZER_SYSTEM = (
    "You answer a question from the rows a database query returned. Write a one-sentence summary "
    "and a short answer. State only facts and numbers that appear in the rows (or the row count); "
    "never estimate or invent values. If there are no rows, say that nothing matched."
)


def synthesizer_messages(
    question: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], *, truncated: bool = False
) -> list[dict[str, Any]]:
    shown = [list(r) for r in rows[:SYNTHESIZER_MAX_ROWS]]
    note = f"{len(rows)} row(s)"
    if len(rows) > len(shown):
        note += f", the first {len(shown)} shown"
    if truncated:
        note += "; the result was cut at the row limit"
    user = (
        f"Question: {question}\n\nColumns: {json.dumps(list(columns), ensure_ascii=False)}\n"
        f"Rows ({note}):\n{json.dumps(shown, ensure_ascii=False, default=str)}"
    )
    return _msgs(SYNTHESIZER_SYSTEM, user)
