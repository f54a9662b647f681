"""The ``<datasource>_schema_index`` assets: each datasource's schema embedded for retrieval and
routing, written under the warehouse where the engine's retriever reads it."""


import time
from collections.abc import Iterator

import dagster as dg

from nl2sql_assets.config import ProjectConfig
from nl2sql_assets.defs.keys import datasource_group, schema_index_key, schema_snapshot_key
from nl2sql_assets.defs.resources import ProjectResource


def schema_index_keys(config: ProjectConfig) -> list[dg.AssetKey]:
    return [schema_index_key(ds.id) for ds in config.datasources]


def build_schema_index(config: ProjectConfig) -> dg.AssetsDefinition:
    """One index asset per datasource. An index whose schema fingerprint, model and entries are
    unchanged is reused as it is (metadata ``reused``), never embedded again."""
    datasources = {schema_index_key(ds.id): ds.id for ds in config.datasources}

    @dg.multi_asset(
        specs=[
            dg.AssetSpec(schema_index_key(ds.id), deps=[schema_snapshot_key(ds.id)], group_name=datasource_group(ds.id),
                         kinds={"onnx", "json"},
                         description=f"Tables, columns, relationships, description and sample questions of "
                                     f"datasource {ds.id}, embedded with the local ONNX MiniLM.")
            for ds in config.datasources
        ],
        can_subset=True,
        name="schema_index",
    )
    def schema_index(context: dg.AssetExecutionContext, project: ProjectResource) -> Iterator[dg.MaterializeResult]:
        from nl2sql_assets.evaluation.history.reuse import stored_snapshot
        from nl2sql_assets.retrieval.index import IndexStore

        warehouse = project.warehouse
        with project.open() as proj:
            store = IndexStore(proj.config, folder=warehouse.schema_index_dir)
            configs = {ds.id: ds for ds in proj.config.datasources}
            for ds_id in sorted(datasources[key] for key in context.selected_asset_keys):
                started = time.perf_counter()
                # The stored snapshot when its database is unchanged (no second introspection).
                snap = (stored_snapshot(warehouse.step_records, warehouse.snapshot_path(ds_id), configs[ds_id])
                        or proj.registry.snapshot(ds_id))
                index = store.get(snap)
                seconds = time.perf_counter() - started
                assert store.folder is not None
                yield dg.MaterializeResult(
                    asset_key=schema_index_key(ds_id),
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
