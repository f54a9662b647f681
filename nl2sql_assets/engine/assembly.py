"""A project's engine put together from its config: the datasource registry it reads, the schema
retriever and the datasource router over one index store. The facade (``Project.engine``) and a
run's worker processes build it the same way, here."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from nl2sql_assets.config import ProjectConfig
from nl2sql_assets.engine.events import EventBus

if TYPE_CHECKING:
    from nl2sql_assets.datasources.registry import DatasourceRegistry
    from nl2sql_assets.engine.pipeline import Engine


def build_engine(config: ProjectConfig, registry: DatasourceRegistry, bus: EventBus,
                 index_folder: Path | None) -> Engine:
    """The engine of ``config``; its indexes are kept in ``index_folder`` (None: in memory only)."""
    from nl2sql_assets.engine.pipeline import Engine
    from nl2sql_assets.retrieval.routing import default_hooks

    # The schema retriever and the router embed lazily: nothing loads until a datasource above
    # settings.retrieval.full_snapshot_max_tables is asked.
    retriever, router = default_hooks(config, registry, folder=index_folder)
    return Engine(config, registry=registry, bus=bus, retriever=retriever, router=router)
