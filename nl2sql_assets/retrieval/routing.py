"""Datasource routing: rank the project's datasources for a question, best first.

A datasource's score is the mean cosine similarity of the question to its ``TOP_ENTRIES``
closest entries among its description, its sample questions and its table and column
entries. The mean of a few keeps one lucky match (a column that happens to be named like a
word of the question) from outranking a datasource that matches on several counts, while
still rewarding a sample question that is nearly the question itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nl2sql_assets.redact import get_logger
from nl2sql_assets.retrieval.index import IndexStore, SchemaIndex

if TYPE_CHECKING:
    import numpy as np

    from nl2sql_assets.config import ProjectConfig

log = get_logger(__name__)  # redacting: see nl2sql_assets.redact

ROUTING_KINDS = ("datasource", "question", "table", "column")
TOP_ENTRIES = 3


def datasource_score(question_vector: np.ndarray, index: SchemaIndex, top: int = TOP_ENTRIES) -> float:
    """Mean similarity of the question to the datasource's ``top`` closest routing entries."""
    import numpy as np
    rows = index.rows(*ROUTING_KINDS)
    if not rows:
        return float("-inf")
    q = np.asarray(question_vector, dtype=np.float64)
    sims = index.matrix(*ROUTING_KINDS) @ q
    best = np.sort(sims)[::-1][: max(1, top)]
    return float(best.mean())


def rank_datasources(question_vector: np.ndarray, indexes: Mapping[str, SchemaIndex],
                     top: int = TOP_ENTRIES) -> list[tuple[str, float]]:
    """``(datasource, score)`` best first; equal scores keep the mapping's order."""
    scored = [(ds, datasource_score(question_vector, index, top)) for ds, index in indexes.items()]
    order = {ds: n for n, (ds, _) in enumerate(scored)}
    return sorted(scored, key=lambda item: (-item[1], order[item[0]]))


class DatasourceRouter:
    """The engine's ``router=`` hook: ``question -> [datasource, ...]``, best first, at most
    ``settings.routing.candidates`` of them. A datasource whose schema cannot be read (a
    missing file) is left out of the ranking rather than failing the question."""

    def __init__(self, config: ProjectConfig, registry: Any, store: IndexStore | None = None,
                 candidates: int | None = None) -> None:
        self.config = config
        self.registry = registry
        self.store = store if store is not None else IndexStore(config)
        self.candidates = candidates if candidates is not None else config.settings.routing.candidates

    def indexes(self) -> dict[str, SchemaIndex]:
        from nl2sql_assets.config import ConfigError
        from nl2sql_assets.datasources.base import DatasourceError

        out: dict[str, SchemaIndex] = {}
        for ds_id in self.registry.ids:
            try:
                snapshot = self.registry.snapshot(ds_id)
            except (DatasourceError, ConfigError, OSError) as exc:
                log.warning("routing leaves out datasource %s: %s", ds_id, exc)
                continue
            out[ds_id] = self.store.get(snapshot)
        return out

    def prepare(self) -> None:
        """Load the embedder and every datasource's index now rather than on the first question."""
        self.store.embedder.load()
        self.indexes()

    def scores(self, question: str) -> list[tuple[str, float]]:
        """Every readable datasource with its score, best first."""
        return rank_datasources(self.store.embedder.embed_query(question), self.indexes())

    def __call__(self, question: str) -> list[str]:
        return [ds for ds, _ in self.scores(question)][: self.candidates]


def default_hooks(config: ProjectConfig, registry: Any, *, folder: Path | None) -> tuple[Any, DatasourceRouter]:
    """The retriever and router a project's engine uses, sharing one index store whose indexes
    are kept in ``folder`` (None: in memory only)."""
    from nl2sql_assets.retrieval.retriever import SchemaRetriever

    store = IndexStore(config, folder=folder)
    return SchemaRetriever(config, store), DatasourceRouter(config, registry, store)
