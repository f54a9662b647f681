"""The schema retriever: which tables and columns the planner is shown for one question.

Two searches, both maximal marginal relevance (MMR) over the index's unit vectors:

1. over the table entries, ``k_tables`` of them;
2. over the column and relationship entries of those tables (a relationship counts when both
   of its tables were chosen), ``k_columns`` of them.

What is sent: every chosen table. A table for which step 2 picked at least one column entry,
or a relationship entry that adds its key columns, is sent with exactly those columns; a
chosen table that step 2 picked nothing for is sent whole, because a table the planner may
join on but not read any column of would be useless. The result is the run's retrieval record,
``{table: [columns]}`` in schema order.

The engine decides whether to search at all: a datasource with at most
``settings.retrieval.full_snapshot_max_tables`` tables is sent whole without a search.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from nl2sql_assets.datasources.schema import SchemaSnapshot
from nl2sql_assets.retrieval.index import IndexStore, SchemaIndex

if TYPE_CHECKING:
    import numpy as np

    from nl2sql_assets.config import ProjectConfig, RetrievalSettings


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    import numpy as np
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim == 1:
        m = m[None, :]
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.clip(norms, 1e-12, None)


def mmr(query: np.ndarray, candidates: np.ndarray, k: int, mmr_lambda: float) -> list[int]:
    """Row numbers of ``candidates``, in the order MMR picks them (at most ``k``).

    Each step takes the candidate with the highest ``lambda * sim(query, c) - (1 - lambda) *
    max sim(c, already picked)``, cosine similarity throughout. ``lambda`` 1 is pure relevance;
    lower values skip candidates that repeat what was already picked. Ties go to the lower row,
    so the same inputs always give the same picks.
    """
    import numpy as np
    cands = _unit_rows(candidates) if len(candidates) else np.zeros((0, 1))
    n = len(cands)
    if n == 0 or k <= 0:
        return []
    q = _unit_rows(query)[0]
    relevance = cands @ q
    similarity = cands @ cands.T
    picked: list[int] = []
    remaining = np.ones(n, dtype=bool)
    redundancy = np.full(n, -np.inf)
    while len(picked) < min(k, n):
        penalty = np.where(np.isfinite(redundancy), redundancy, 0.0)
        scores = mmr_lambda * relevance - (1.0 - mmr_lambda) * penalty
        scores = np.where(remaining, scores, -np.inf)
        best = int(np.argmax(scores))
        picked.append(best)
        remaining[best] = False
        redundancy = np.maximum(redundancy, similarity[:, best])
    return picked


def _columns_of(table: str, qualified: Sequence[str]) -> list[str]:
    prefix = table.lower() + "."
    return [name[len(prefix):] for name in qualified if name.lower().startswith(prefix)]


def retrieve(question_vector: np.ndarray, index: SchemaIndex, snapshot: SchemaSnapshot, *, k_tables: int,
             k_columns: int, mmr_lambda: float) -> dict[str, list[str]]:
    """The retrieval record for one question (its vector) over one datasource's index."""
    table_rows = index.rows("table")
    picked_tables = mmr(question_vector, index.vectors[table_rows], k_tables, mmr_lambda)
    chosen = {index.entries[table_rows[i]].tables[0].lower() for i in picked_tables}

    detail_rows = [r for r, tables in zip(index.rows("column", "relationship"),
                                          index.table_sets("column", "relationship"), strict=True)
                   if tables <= chosen]
    picked_details = mmr(question_vector, index.vectors[detail_rows], k_columns, mmr_lambda) if detail_rows else []
    columns: dict[str, set[str]] = {}
    for i in picked_details:
        entry = index.entries[detail_rows[i]]
        for table in entry.tables:
            columns.setdefault(table.lower(), set()).update(c.lower() for c in _columns_of(table, entry.columns))

    sent: dict[str, list[str]] = {}
    for table in snapshot.tables:
        key = table.name.lower()
        if key not in chosen:
            continue
        keep = columns.get(key)
        sent[table.name] = [c.name for c in table.columns if not keep or c.name.lower() in keep]
    return sent


class SchemaRetriever:
    """The engine's ``retriever=`` hook: ``(question, snapshot) -> {table: [columns]}``.

    Indexes come from an :class:`IndexStore` (built or loaded on first use of each schema);
    k values and MMR's lambda from ``settings.retrieval``."""

    def __init__(self, config: ProjectConfig, store: IndexStore | None = None,
                 settings: RetrievalSettings | None = None) -> None:
        self.config = config
        self.store = store if store is not None else IndexStore(config)
        self.settings = settings if settings is not None else config.settings.retrieval

    def __call__(self, question: str, snapshot: SchemaSnapshot) -> dict[str, list[str]]:
        index = self.store.get(snapshot)
        vector = self.store.embedder.embed_query(question)
        s = self.settings
        return retrieve(vector, index, snapshot, k_tables=s.k_tables, k_columns=s.k_columns,
                        mmr_lambda=s.mmr_lambda)

    def describe(self) -> dict[str, object]:
        """The settings a report keeps, so two runs are only compared like for like."""
        s = self.settings
        return {"k_tables": s.k_tables, "k_columns": s.k_columns, "mmr_lambda": s.mmr_lambda,
                "mmr_over": "tables, then column and relationship entries of the chosen tables",
                "embedder": self.store.embedder.identity}
