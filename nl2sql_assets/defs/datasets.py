"""Assets for the data a run stands on: the demo databases, their schema snapshots, the suites
and their regenerated rows (with a drift check against the suite file on disk)."""


import shutil
from collections.abc import Iterator
from pathlib import Path

import dagster as dg

from nl2sql_assets.atomic import atomic_write
from nl2sql_assets.config import ProjectConfig
from nl2sql_assets.defs.resources import ProjectResource

DATASETS_GROUP = "datasets"
SUITES_GROUP = "suites"


@dg.asset(group_name=DATASETS_GROUP, kinds={"sqlite", "duckdb"})
def demo_datasets(project: ProjectResource) -> dg.MaterializeResult:
    """The project's demo databases: Chinook (checked by SHA-256) and the generated support and
    webanalytics DuckDB files. Files that are already right are left alone."""
    from nl2sql_assets.datasources.demo import ensure_demo_data

    with project.open() as proj:
        paths = ensure_demo_data(proj.config)
    return dg.MaterializeResult(
        metadata={
            "datasources": dg.MetadataValue.json({k: str(v) for k, v in paths.items()}),
            **{f"{k}_bytes": v.stat().st_size for k, v in paths.items()},
        }
    )


def schema_snapshot_keys(config: ProjectConfig) -> list[dg.AssetKey]:
    return [dg.AssetKey(["schema_snapshots", ds.id]) for ds in config.datasources]


def build_schema_snapshots(config: ProjectConfig) -> dg.AssetsDefinition:
    """One snapshot asset per datasource, with its fingerprint as metadata."""

    @dg.multi_asset(
        specs=[
            dg.AssetSpec(key, deps=[demo_datasets], group_name=DATASETS_GROUP, kinds={"json"},
                         description=f"Tables, columns, types and keys of datasource {key.path[-1]}.")
            for key in schema_snapshot_keys(config)
        ],
        can_subset=True,
        name="schema_snapshots",
    )
    def schema_snapshots(context: dg.AssetExecutionContext, project: ProjectResource) -> Iterator[dg.MaterializeResult]:
        with project.open() as proj:
            for key in sorted(context.selected_asset_keys, key=lambda k: k.path[-1]):
                ds_id = key.path[-1]
                snap = proj.registry.snapshot(ds_id)
                out = project.warehouse.root / "snapshots" / f"{ds_id}.json"
                atomic_write(out, snap.model_dump_json(indent=1))
                yield dg.MaterializeResult(
                    asset_key=key,
                    metadata={
                        "fingerprint": snap.fingerprint(),
                        "tables": len(snap.tables),
                        "columns": snap.column_count,
                        "engine": snap.engine,
                        "path": dg.MetadataValue.path(str(out)),
                        "table_list": dg.MetadataValue.md(
                            "| table | columns | primary key |\n|---|---|---|\n" + "\n".join(
                                f"| {t.name} | {len(t.columns)} | {', '.join(t.primary_key)} |" for t in snap.tables
                            )
                        ),
                    },
                )

    return schema_snapshots


def build_suite_assets(name: str, path: Path, config: ProjectConfig) -> list:
    """``suites/<name>``, ``regenerated_rows/<name>`` and the drift check between them."""
    suite_key = dg.AssetKey(["suites", name])
    rows_key = dg.AssetKey(["regenerated_rows", name])

    @dg.asset(key=suite_key, group_name=SUITES_GROUP, kinds={"yaml"},
              description=f"The validated suite {path.name}: reviewed cases and what each role should get.")
    def suite_asset() -> dg.MaterializeResult:
        from nl2sql_assets.evaluation.suite import load_suite, suite_digest

        suite = load_suite(path)
        by_status: dict[str, int] = {}
        by_kind: dict[str, int] = {}
        tags: dict[str, int] = {}
        for case in suite.cases:
            by_status[case.status] = by_status.get(case.status, 0) + 1
            by_kind[case.kind] = by_kind.get(case.kind, 0) + 1
            for tag in case.tags:
                tags[tag] = tags.get(tag, 0) + 1
        return dg.MaterializeResult(
            metadata={
                "digest": suite_digest(path),
                "cases": len(suite.cases),
                "approved": by_status.get("approved", 0),
                "by_status": dg.MetadataValue.json(by_status),
                "by_kind": dg.MetadataValue.json(by_kind),
                "tags": dg.MetadataValue.table(
                    records=[dg.TableRecord({"tag": t, "cases": n}) for t, n in sorted(tags.items())],
                    schema=dg.TableSchema(columns=[dg.TableColumn("tag", "string"), dg.TableColumn("cases", "int")]),
                ),
                "path": dg.MetadataValue.path(str(path)),
            }
        )

    @dg.asset(key=rows_key, deps=[suite_key, *schema_snapshot_keys(config)], group_name=SUITES_GROUP,
              kinds={"yaml"},
              description="The suite with rows regenerated from its SQL, written to the warehouse (the suite "
                          "file itself is changed only by `nl2sql-assets eval regenerate`).")
    def regenerated_rows(project: ProjectResource) -> dg.MaterializeResult:
        from nl2sql_assets.evaluation.regenerate import regenerate

        copy = regenerated_copy(project, name)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, copy)
        with project.open() as proj:
            report = regenerate(copy, proj.registry)
        return dg.MaterializeResult(
            metadata={
                "written": report.written,
                "cases": report.cases,
                "failed": len(report.failed),
                "failures": dg.MetadataValue.json([f.model_dump() for f in report.failed]),
                "matches_suite_file": report.unchanged,
                "path": dg.MetadataValue.path(str(copy)),
            }
        )

    @dg.asset_check(asset=rows_key, name="suite_file_is_regenerated", blocking=False,
                    description="The suite file on disk is exactly what regenerate writes (no stale rows).")
    def suite_file_is_regenerated(project: ProjectResource) -> dg.AssetCheckResult:
        from nl2sql_assets.evaluation.suite import load_suite

        copy = regenerated_copy(project, name)
        if not copy.exists():
            return dg.AssetCheckResult(passed=False, description="regenerated_rows has not been materialised")
        same = copy.read_bytes().replace(b"\r\n", b"\n") == path.read_bytes().replace(b"\r\n", b"\n")
        stale: list[str] = []
        if not same:
            fresh = {c.id: c for c in load_suite(copy).cases}
            stale = [c.id for c in load_suite(path, allow_stale_rows=True).cases
                     if c.id in fresh and (c.rows, c.alt_rows) != (fresh[c.id].rows, fresh[c.id].alt_rows)]
        return dg.AssetCheckResult(
            passed=same,
            metadata={"stale_cases": dg.MetadataValue.json(stale), "stale": len(stale)},
            description=None if same else
            f"{len(stale)} case(s) have rows that differ from their SQL's: run `nl2sql-assets eval regenerate {path}`",
        )

    return [suite_asset, regenerated_rows, suite_file_is_regenerated]


def regenerated_copy(project: ProjectResource, name: str) -> Path:
    return project.warehouse.root / "regenerated" / f"{name}.yaml"
