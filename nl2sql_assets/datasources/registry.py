"""The datasource registry: one adapter per configured datasource, opened on first use and shared."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from types import TracebackType

from nl2sql_assets.config import ConfigError, DatasourceConfig, ProjectConfig
from nl2sql_assets.datasources.base import DatasourceAdapter
from nl2sql_assets.datasources.engines import check_datasource, engine_of
from nl2sql_assets.datasources.schema import SchemaSnapshot


def open_adapter(cfg: DatasourceConfig, *, bulk: bool = False) -> DatasourceAdapter:
    """The adapter of ``cfg``, opened by its engine (whose module, and driver, is imported only
    when a datasource of it is used). ``bulk``: one reader for thousands of statements (the
    prediction grader), each checked by the database's own rules only."""
    check_datasource(cfg)
    return engine_of(cfg.engine).open(cfg, bulk=bulk)


class DatasourceRegistry:
    """Adapters and schema snapshots by datasource id; safe to share between threads."""

    def __init__(self, config: ProjectConfig | Iterable[DatasourceConfig]) -> None:
        datasources = config.datasources if isinstance(config, ProjectConfig) else list(config)
        self._configs: dict[str, DatasourceConfig] = {ds.id: ds for ds in datasources}
        self._adapters: dict[str, DatasourceAdapter] = {}
        self._snapshots: dict[str, SchemaSnapshot] = {}
        self._lock = threading.RLock()

    @classmethod
    def from_adapters(cls, adapters: Mapping[str, DatasourceAdapter]) -> DatasourceRegistry:
        """A registry over adapters made elsewhere (tests, embedding applications)."""
        registry = cls([])
        registry._adapters = dict(adapters)
        return registry

    @property
    def ids(self) -> list[str]:
        """Configured datasource ids, in config order."""
        return list(dict.fromkeys([*self._configs, *self._adapters]))

    def config(self, datasource_id: str) -> DatasourceConfig | None:
        return self._configs.get(datasource_id)

    def _unknown(self, datasource_id: str) -> ConfigError:
        return ConfigError(f"unknown datasource {datasource_id!r}; known datasources: {self.ids}")

    def get(self, datasource_id: str) -> DatasourceAdapter:
        adapter = self._adapters.get(datasource_id)
        if adapter is not None:
            return adapter
        with self._lock:
            adapter = self._adapters.get(datasource_id)
            if adapter is None:
                cfg = self._configs.get(datasource_id)
                if cfg is None:
                    raise self._unknown(datasource_id)
                adapter = open_adapter(cfg)
                self._adapters[datasource_id] = adapter
            return adapter

    def cached_snapshot(self, datasource_id: str) -> SchemaSnapshot | None:
        """The snapshot already taken, or None: no database work (an event loop may call it)."""
        return self._snapshots.get(datasource_id)

    def snapshot(self, datasource_id: str) -> SchemaSnapshot:
        snap = self._snapshots.get(datasource_id)
        if snap is not None:
            return snap
        adapter = self.get(datasource_id)
        with self._lock:
            snap = self._snapshots.get(datasource_id)
            if snap is None:
                snap = adapter.introspect()
                self._snapshots[datasource_id] = snap
            return snap

    def __contains__(self, datasource_id: object) -> bool:
        return datasource_id in self._configs or datasource_id in self._adapters

    def close(self) -> None:
        """Close every opened adapter. A later ``get`` opens a fresh one from the config (adapters
        handed to ``from_adapters`` are kept; they reopen on their next call)."""
        with self._lock:
            adapters = list(self._adapters.values())
            self._snapshots = {}
            if self._configs:  # opened from config: drop them, so a later get reopens
                self._adapters = {}
        for adapter in adapters:
            adapter.close()

    def __enter__(self) -> DatasourceRegistry:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
