"""The ``schema_index/<datasource>`` assets: each datasource's schema embedded for retrieval and
routing, written under the warehouse where the engine's retriever reads it."""


import time
from collections.abc import Iterator

import dagster as dg

from nl2sql_assets.config import ProjectConfig
from nl2sql_assets.defs.datasets import DATASETS_GROUP
from nl2sql_assets.defs.resources import ProjectResource


def schema_index_keys(config: ProjectConfig) -> list[dg.AssetKey]:
    return [dg.AssetKey(["schema_index", ds.id]) for ds in config.datasources]


def build_schema_index(config: ProjectConfig) -> dg.AssetsDefinition:
    """One index asset per datasource. An index whose schema fingerprint, model and entries are
    unchanged is reused as it is (metadata ``reused``), never embedded again."""

    @dg.multi_asset(
        specs=[
            dg.AssetSpec(key, deps=[dg.AssetKey(["schema_snapshots", key.path[-1]])], group_name=DATASETS_GROUP,
                         kinds={"onnx", "json"},
                         description=f"Tables, columns, relationships, description and sample questions of "
                                     f"datasource {key.path[-1]}, embedded with the local ONNX MiniLM.")
            for key in schema_index_keys(config)
        ],
        can_subset=True,
        name="schema_index",
    )
    def schema_index(context: dg.AssetExecutionContext, project: ProjectResource) -> Iterator[dg.MaterializeResult]:
        from nl2sql_assets.retrieval.index import IndexStore

        with project.open() as proj:
            store = IndexStore(proj.config, folder=project.warehouse.schema_index_dir)
            for key in sorted(context.selected_asset_keys, key=lambda k: k.path[-1]):
                ds_id = key.path[-1]
                started = time.perf_counter()
                index = store.get(proj.registry.snapshot(ds_id))
                seconds = time.perf_counter() - started
                assert store.folder is not None
                yield dg.MaterializeResult(
                    asset_key=key,
                    metadata={
                        "entries": len(index.entries),
                        "dimensions": index.dimensions,
                        "seconds": round(seconds, 3),
                        "reused": index.reused,
                        "fingerprint": index.schema_fingerprint,
                        "model": index.model,
                        "by_kind": dg.MetadataValue.json(index.counts()),
                        "path": dg.MetadataValue.path(str(store.folder / f"{ds_id}.json")),
                    },
                )

    return schema_index
