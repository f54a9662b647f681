"""Assets for neighbour databases (evals.yaml ``neighbours:``): each datasource's kept set
(``<datasource>/neighbours``) and each suite's gold on it with its gold audit
(``<suite>/neighbour_rows``), upstream of the suite's case runs. Both are read back while the
database, the gold and the settings are unchanged (``neighbours.store`` keys the set by them)."""


from pathlib import Path
from typing import Any

import dagster as dg

from nl2sql_assets.config import ProjectConfig
from nl2sql_assets.defs.datasets import reuse_metadata
from nl2sql_assets.defs.keys import (
    datasource_group,
    neighbour_rows_key,
    neighbours_key,
    regenerated_rows_key,
    schema_snapshot_key,
    suite_group,
    suite_key,
)
from nl2sql_assets.defs.redaction import safe_metadata
from nl2sql_assets.defs.resources import ProjectResource


def suite_datasources(suites: list[tuple[str, Path]], config: ProjectConfig) -> dict[str, list[str] | None]:
    """Suite name -> the datasources its gradable gold reads (through the suite cache); None for a
    suite that cannot be read now (its own asset fails with why, when it is materialised)."""
    from nl2sql_assets.errors import UserError
    from nl2sql_assets.evaluation.neighbours.store import golds_by_datasource
    from nl2sql_assets.evaluation.suites import load_suite
    from nl2sql_assets.paths import suite_cache_dir

    out: dict[str, list[str] | None] = {}
    for name, path in suites:
        try:
            suite = load_suite(path, cache_dir=suite_cache_dir(config.root))
        except (UserError, OSError):
            out[name] = None
            continue
        out[name] = sorted(golds_by_datasource([(name, suite)]))
    return out


def build_neighbour_assets(config: ProjectConfig, suites: list[tuple[str, Path]]) -> tuple[list, dict[str, list]]:
    """The neighbour assets of a project with ``neighbours:`` set (none without), and per suite
    the keys its case runs depend on."""
    if config.evals_config.neighbours is None:
        return [], {}
    reads = suite_datasources(suites, config)
    names = [name for name, _ in suites]
    known = {d.id for d in config.datasources}
    datasources = sorted({ds for name in names for ds in reads.get(name) or [] if ds in known})
    engines = {d.id: d.engine for d in config.datasources}
    assets: list = [_datasource_neighbours(ds, [n for n in names if ds in (reads.get(n) or datasources)],
                                           engines[ds]) for ds in datasources]
    deps: dict[str, list] = {}
    for name, path in suites:
        read = reads.get(name)
        mine = datasources if read is None else [ds for ds in read if ds in datasources]
        if mine:  # a suite without gold SQL to grade (policy probes, clarify questions) has none
            assets.append(_suite_neighbour_rows(name, path, mine))
            deps[name] = [neighbour_rows_key(name)]
    return assets, deps


def _datasource_neighbours(datasource: str, suites: list[str], engine: str) -> dg.AssetsDefinition:
    @dg.asset(key=neighbours_key(datasource), deps=[schema_snapshot_key(datasource), *map(suite_key, suites)],
              group_name=datasource_group(datasource), kinds={engine},
              description=f"The kept neighbour databases of {datasource}: small databases of its schema, chosen "
                          f"because they tell near-miss SQL apart from the gold of {', '.join(suites)} where "
                          f"{datasource} itself cannot.")
    def neighbours(project: ProjectResource) -> dg.MaterializeResult:
        from nl2sql_assets.evaluation.neighbours.store import project_sets, project_suites
        from nl2sql_assets.paths import neighbours_dir

        with project.open() as proj:
            settings = proj.config.evals_config.neighbours
            assert settings is not None
            sets = project_sets(proj.config, project_suites(proj.config), settings, neighbours_dir(proj.config.root),
                                datasources=[datasource])
        kept = sets.get(datasource)
        if kept is None:
            return dg.MaterializeResult(metadata={"kept": 0, "note": "no suite's gold reads this datasource"})
        return dg.MaterializeResult(metadata=safe_metadata(set_metadata(kept)))

    return neighbours


def set_metadata(kept: Any) -> dict[str, Any]:
    """K, the files and their sizes, what they separate, how long they took."""
    m = kept.manifest
    return {
        "kept": len(m.kept),
        "K": m.keep,
        "seed": m.seed,
        "candidates": m.candidates,
        "gold_queries": m.gold_queries,
        "mutants": m.mutants,
        "separated_on_original": m.separated_on_original,
        "separated": m.separated,
        "separable": m.separable,
        **({"separated_share": m.separated_share} if m.separated_share is not None else {}),
        "possibly_equivalent": m.possibly_equivalent,
        "rows_kept": sum(sum(f.rows.values()) for f in m.files),
        "bytes_kept": sum(f.bytes for f in m.files),
        "files": dg.MetadataValue.md(
            "| neighbour | rows | bytes | separates |\n|---|---:|---:|---:|\n" + "\n".join(
                f"| {f.name} | {sum(f.rows.values())} | {f.bytes} | {f.separates} |" for f in m.files)),
        "possibly_equivalent_by_rule": dg.MetadataValue.json(m.possibly_equivalent_by_rule),
        "generation_s": m.generation_s,
        "distillation_s": m.distillation_s,
        "folder": dg.MetadataValue.path(str(kept.home)),
        **reuse_metadata(kept.reused, "the database file, the suites' gold and the neighbour settings"),
    }


def _suite_neighbour_rows(name: str, path: Path, datasources: list[str]) -> dg.AssetsDefinition:
    @dg.asset(key=neighbour_rows_key(name), deps=[regenerated_rows_key(name), *map(neighbours_key, datasources)],
              group_name=suite_group(name), kinds={"json"},
              description=f"The gold of {name} on each kept neighbour (computed while distilling, read from the "
                          "set), and its gold audit: ties under ORDER BY ... LIMIT, empty or slow gold, gold that "
                          "is the same everywhere, alternatives that disagree with it on a neighbour.")
    def neighbour_rows(project: ProjectResource) -> dg.MaterializeResult:
        from nl2sql_assets.atomic import atomic_write
        from nl2sql_assets.evaluation.neighbours.audit import audit_suite
        from nl2sql_assets.evaluation.neighbours.store import (
            gold_query,
            neighbour_cases,
            project_sets,
            project_suites,
        )
        from nl2sql_assets.evaluation.suites import load_suite
        from nl2sql_assets.paths import neighbours_dir

        suite = load_suite(path)
        with project.open() as proj:
            settings = proj.config.evals_config.neighbours
            assert settings is not None
            sets = project_sets(proj.config, project_suites(proj.config, [(name, suite)]), settings,
                                neighbours_dir(proj.config.root), datasources=datasources)
            audit = audit_suite(proj.config, name, suite, settings, sets=sets)
            out = neighbours_dir(proj.config.root) / "audit" / f"{name}.json"
        cases = neighbour_cases(suite)
        missing = [c.id for c in cases if c.datasources[0] in sets
                   and gold_query(c, name).digest not in sets[c.datasources[0]].golds]
        if missing:  # the set is keyed by every gold it holds: a gold missing means a damaged set
            raise dg.Failure(description=f"{name}: no neighbour rows for {', '.join(missing[:10])}; delete "
                                         f"{neighbours_dir(proj.config.root)} and materialise again")
        atomic_write(out, audit.model_dump_json(indent=1) + "\n")
        return dg.MaterializeResult(metadata=safe_metadata({
            "cases": len(cases),
            "graded_on_neighbours": sum(1 for c in cases if c.datasources[0] in sets),
            "neighbours": dg.MetadataValue.json({ds: len(kept.paths) for ds, kept in sets.items()}),
            "audit_flags": len(audit.flags),
            **{f"audit_{kind}": n for kind, n in audit.counts.items()},
            "audit": dg.MetadataValue.md(
                "| case | flag | where | why |\n|---|---|---|---|\n" + "\n".join(
                    f"| {f.case} | {f.kind} | {f.where or ''} | {f.message} |" for f in audit.flags)
                if audit.flags else "No flag: no gold of the suite leans on row order, is empty, slow, the same "
                                    "everywhere, or disagrees with an alternative on a neighbour."),
            **({"gold_median_ms": audit.median_ms} if audit.median_ms is not None else {}),
            "audit_file": dg.MetadataValue.path(str(out)),
        }))

    return neighbour_rows
