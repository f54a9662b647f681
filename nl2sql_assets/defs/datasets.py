"""Assets for the data a run stands on: the demo databases, their schema snapshots, the suites
and their regenerated rows (with a drift check against the suite file on disk)."""


from collections.abc import Iterator
from pathlib import Path

import dagster as dg

from nl2sql_assets.config import ProjectConfig
from nl2sql_assets.defs.keys import (
    DATASETS_GROUP,
    DEMO_DATASETS,
    datasource_group,
    regenerated_rows_key,
    schema_snapshot_key,
    suite_group,
    suite_key,
)
from nl2sql_assets.defs.resources import ProjectResource


@dg.asset(key=DEMO_DATASETS, group_name=DATASETS_GROUP, kinds={"sqlite", "duckdb"})
def demo_datasets(project: ProjectResource) -> dg.MaterializeResult:
    """The project's demo databases: Chinook (checked by SHA-256) and the generated support and
    webanalytics DuckDB files. Files that are already right are left alone."""
    from nl2sql_assets.datasources.chinook import ChinookNotFound
    from nl2sql_assets.demo import ensure_demo_data

    with project.open() as proj:
        try:
            paths = ensure_demo_data(proj.config)
        except ChinookNotFound as exc:  # what to do, not a stack trace
            raise dg.Failure(description=f"{exc}. Give it a local copy once: `nl2sql-assets data --chinook "
                                         "PATH` in the project folder, or start `dagster dev` with "
                                         "NL2SQL_CHINOOK=PATH set.") from None
    return dg.MaterializeResult(
        metadata={
            "datasources": dg.MetadataValue.json({k: str(v) for k, v in paths.items()}),
            **{f"{k}_bytes": v.stat().st_size for k, v in paths.items()},
        }
    )


def schema_snapshot_keys(config: ProjectConfig) -> list[dg.AssetKey]:
    return [schema_snapshot_key(ds.id) for ds in config.datasources]


def build_schema_snapshots(config: ProjectConfig) -> dg.AssetsDefinition:
    """One snapshot asset per datasource, with its fingerprint as metadata."""
    datasources = {schema_snapshot_key(ds.id): ds.id for ds in config.datasources}

    @dg.multi_asset(
        specs=[
            dg.AssetSpec(schema_snapshot_key(ds.id), deps=[demo_datasets], group_name=datasource_group(ds.id),
                         kinds={"json"}, description=f"Tables, columns, types and keys of datasource {ds.id}.")
            for ds in config.datasources
        ],
        can_subset=True,
        name="schema_snapshots",
    )
    def schema_snapshots(context: dg.AssetExecutionContext, project: ProjectResource) -> Iterator[dg.MaterializeResult]:
        from nl2sql_assets.evaluation.history.reuse import snapshot_key, snapshot_record_name, stored_snapshot

        warehouse = project.warehouse
        records = warehouse.step_records
        with project.open() as proj:
            configs = {ds.id: ds for ds in proj.config.datasources}
            for ds_id in sorted(datasources[key] for key in context.selected_asset_keys):
                # The stored snapshot when the database, its settings, the code and its libraries
                # are what they were when it was taken: it is what introspection would give.
                out = warehouse.snapshot_path(ds_id)
                snap = stored_snapshot(records, out, configs[ds_id])
                reused = snap is not None
                if snap is None:
                    key = snapshot_key(configs[ds_id])  # the inputs as they were before reading them
                    snap = proj.registry.snapshot(ds_id)
                    out = warehouse.write_snapshot(snap)
                    records.store(snapshot_record_name(ds_id), key, out, {})
                yield dg.MaterializeResult(
                    asset_key=schema_snapshot_key(ds_id),
                    metadata={
                        "fingerprint": snap.fingerprint(),
                        "tables": len(snap.tables),
                        "columns": snap.column_count,
                        "engine": snap.engine,
                        "path": dg.MetadataValue.path(str(out)),
                        "table_list": dg.MetadataValue.md(snap.markdown_table()),
                        **reuse_metadata(reused, "the database file, its settings, the code and its libraries"),
                    },
                )

    return schema_snapshots


def build_suite_assets(name: str, path: Path, config: ProjectConfig) -> list:
    """``<name>/suite``, ``<name>/regenerated_rows`` and the drift check between them."""
    rows_key = regenerated_rows_key(name)

    @dg.asset(key=suite_key(name), group_name=suite_group(name), kinds={"yaml"},
              description=f"The validated suite {path.name}: reviewed cases and what each role should get.")
    def suite_asset() -> dg.MaterializeResult:
        from nl2sql_assets.evaluation.suites import load_suite, suite_digest

        suite = load_suite(path)
        tally = suite.tally()
        return dg.MaterializeResult(
            metadata={
                "digest": suite_digest(path),
                "cases": len(suite.cases),
                "approved": tally.by_status.get("approved", 0),
                "by_status": dg.MetadataValue.json(tally.by_status),
                "by_kind": dg.MetadataValue.json(tally.by_kind),
                "tags": dg.MetadataValue.table(
                    records=[dg.TableRecord({"tag": t, "cases": n}) for t, n in tally.by_tag.items()],
                    schema=dg.TableSchema(columns=[dg.TableColumn("tag", "string"), dg.TableColumn("cases", "int")]),
                ),
                "path": dg.MetadataValue.path(str(path)),
            }
        )

    @dg.asset(key=rows_key, deps=[suite_key(name), *schema_snapshot_keys(config)], group_name=suite_group(name),
              kinds={"yaml"},
              description=f"{path.name} with rows regenerated from its SQL, written to the warehouse (the "
                          "suite file itself is changed only by `nl2sql-assets eval regenerate`).")
    def regenerated_rows(project: ProjectResource) -> dg.MaterializeResult:
        from nl2sql_assets.evaluation.history.reuse import regenerated_rows_key, regenerated_rows_record_name
        from nl2sql_assets.evaluation.suites import RegenerateReport, regenerate_copy

        warehouse = project.warehouse
        copy = warehouse.regenerated_suite_path(name)
        records = warehouse.step_records
        with project.open() as proj:
            # The rows are a function of the suite file, the databases and their settings, the
            # code and its libraries: unchanged, the copy regenerated last time is this one.
            key = regenerated_rows_key(path, proj.config.datasources)
            hit = records.lookup(regenerated_rows_record_name(name), key, copy)
            if hit is not None:
                report = RegenerateReport.model_validate(hit.data)
            else:
                report = regenerate_copy(path, copy, proj.registry)
                if not report.failed:  # a failure may be the machine's (a timeout): never kept
                    records.store(regenerated_rows_record_name(name), key, copy, report.model_dump(mode="json"))
        return dg.MaterializeResult(
            metadata={
                "written": report.written,
                "cases": report.cases,
                "failed": len(report.failed),
                "failures": dg.MetadataValue.json([f.model_dump() for f in report.failed]),
                "matches_suite_file": report.unchanged,
                "path": dg.MetadataValue.path(str(copy)),
                **reuse_metadata(hit is not None, "the suite file, the databases and their settings, the code "
                                                  "and its libraries"),
            }
        )

    @dg.asset_check(asset=rows_key, name="suite_file_is_regenerated", blocking=False,
                    description=f"{path.name} on disk is exactly what regenerate writes (no stale rows).")
    def suite_file_is_regenerated(project: ProjectResource) -> dg.AssetCheckResult:
        from nl2sql_assets.evaluation.suites import drift

        copy = project.warehouse.regenerated_suite_path(name)
        if not copy.exists():
            return dg.AssetCheckResult(passed=False, description="regenerated_rows has not been materialised")
        found = drift(path, copy)
        return dg.AssetCheckResult(
            passed=found.same,
            metadata={"stale_cases": dg.MetadataValue.json(found.stale), "stale": len(found.stale)},
            description=None if found.same else
            f"{len(found.stale)} case(s) have rows that differ from their SQL's: "
            f"run `nl2sql-assets eval regenerate {path}`",
        )

    return [suite_asset, regenerated_rows, suite_file_is_regenerated]



def reuse_metadata(reused: bool, inputs: str) -> dict[str, object]:
    """What a dataset step says about reuse: ``reused`` (a plottable flag) and why."""
    return {
        "reused": reused,
        "reuse": dg.MetadataValue.text(f"reused: {inputs} are unchanged since it was computed" if reused
                                       else f"computed ({inputs} changed, or no result of them was stored)"),
    }
