"""``neighbours show``: a kept neighbour's (or a witness's) rows of the tables a case reads, and the
gold's and a prediction's results there."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from nl2sql_assets.cli.common import (
    EXIT_OK,
    add_command,
    add_group,
    add_neighbour_options,
    neighbour_settings,
    project_config_path,
)


def add(sub: Any) -> None:
    nsub = add_group(sub, "neighbours", help="look at the neighbour databases eval run and eval grade keep",
                     description="Neighbour databases of a suite's datasources, and the witnesses the search "
                                 "found (see eval grade --neighbours).", dest="neighbours_command")
    prune = add_command(
        nsub, "prune", cmd_prune, help="remove the neighbour sets no suite uses, and their server namespaces",
        description="Remove every kept set under warehouse/neighbours/ that the project's suites do not use with "
                    "evals.yaml's neighbour settings (another database, gold or setting made it), with its server "
                    "schemas or databases, and every namespace this project made on a server's scratch place that "
                    "no kept set names (left by a build or a search that was killed). Another project's namespaces "
                    "in the same scratch place are listed and left alone. --dry-run lists them only.")
    prune.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    prune.add_argument("--every-project", action="store_true",
                       help="also remove the namespaces of other projects (and those made before namespaces carried "
                            "their project's mark) that no set of this project names: only where no other project "
                            "builds there")
    add_neighbour_options(prune, "grade", witness=False)
    show = add_command(
        nsub, "show", cmd_neighbours, help="one neighbour's (or witness's) rows that a case reads, and the gold's and a prediction's "
                     "result there",
        description="Print the rows a case's gold reads on one kept neighbour database (N), or on a witness "
                    "database the witness search found for one of the case's predictions (no N: the witness of "
                    "--sql, else every witness found for the case, the first shown), and the gold's and the "
                    "prediction's result there. Writes nothing; exit 2 where there is no such neighbour or "
                    "witness.")
    show.add_argument("case", metavar="CASE", help="the case id")
    show.add_argument("number", type=int, nargs="?", default=None, metavar="N",
                      help="the neighbour's number in its set (0 is the first kept); left out: a witness")
    show.add_argument("--suite", required=True, metavar="PATH", help="the suite the case belongs to")
    show.add_argument("--sql", default=None, help="a prediction to run there beside the gold (without N: the "
                                                  "prediction whose witness to show)")
    add_neighbour_options(show, "grade", witness=False)
    show.add_argument("--rows", type=int, default=20, metavar="N", help="rows shown per table (default 20)")


def cmd_prune(args: argparse.Namespace) -> int:
    from nl2sql_assets.config import NeighbourSettings
    from nl2sql_assets.evaluation.neighbours.store import prune_sets
    from nl2sql_assets.paths import neighbours_dir
    from nl2sql_assets.project import load_project_config

    config = load_project_config(project_config_path(args))
    settings = neighbour_settings(args, config) or NeighbourSettings()
    pruned = prune_sets(config, settings, neighbours_dir(config.root), dry_run=args.dry_run,
                        every_project=args.every_project)
    verb = "would remove" if args.dry_run else "removed"
    for path in pruned.sets:
        print(f"{verb} set {path}")
    for namespace in pruned.namespaces:
        print(f"{verb} {namespace} (a namespace of this project's no kept set names)")
    for namespace in pruned.others:
        print(f"left {namespace} (another project's, or made before namespaces carried their project's mark; "
              "--every-project removes it)")
    print(f"{len(pruned.kept)} set(s) kept (the ones the project's suites use), {len(pruned.sets)} set(s) and "
          f"{len(pruned.namespaces)} server namespace(s) {verb}"
          + (f", {len(pruned.others)} of other projects left" if pruned.others else ""))
    return EXIT_OK


def cmd_neighbours(args: argparse.Namespace) -> int:
    config_path = project_config_path(args)
    import sqlglot
    from sqlglot import exp

    from nl2sql_assets.config import NeighbourSettings
    from nl2sql_assets.errors import UserError
    from nl2sql_assets.evaluation.neighbours.distill import rows_or_none
    from nl2sql_assets.evaluation.neighbours.formats import format_of
    from nl2sql_assets.evaluation.neighbours.store import (
        gold_query,
        neighbour_cases,
        project_sets,
        project_suites,
    )
    from nl2sql_assets.evaluation.suites.loader import load_suite
    from nl2sql_assets.paths import neighbours_dir
    from nl2sql_assets.project import load_project_config

    config = load_project_config(config_path)
    suite = load_suite(args.suite)
    case = next((c for c in neighbour_cases(suite) if c.id == args.case), None)
    if case is None:
        raise UserError(f"{args.suite}: no case {args.case!r} with gold SQL on one datasource to show")
    datasource = case.datasources[0]
    settings = neighbour_settings(args, config) or NeighbourSettings()
    name = suite.name or Path(args.suite).stem
    kept = project_sets(config, project_suites(config, [(name, suite)]), settings, neighbours_dir(config.root),
                        datasources=[datasource])[datasource]
    paths = kept.paths
    files = format_of(kept.engine)
    if args.number is None:
        path, prediction = _witness_to_show(kept, gold_query(case, name), args.sql)
        args.sql = args.sql or prediction
    else:
        if not 0 <= args.number < len(paths):
            raise UserError(f"neighbour {args.number}: the set of {datasource!r} keeps {len(paths)} "
                            f"(0 to {len(paths) - 1})")
        path = paths[args.number]
        print(f"{case.id} on {path} (set {kept.manifest.key} of {datasource!r}: {len(paths)} kept, "
              f"seed {kept.manifest.seed})")
    tables = sorted({t.name for t in sqlglot.parse_one(case.sql or "", read=files.dialect).find_all(exp.Table)
                     if t.name})
    adapter = files.open(path)
    try:
        for table in tables:
            out = rows_or_none(adapter, f'SELECT * FROM "{table}" LIMIT {int(args.rows) + 1}')
            if out is None:
                continue  # a CTE's name, not a table of the database
            shown = out[: args.rows]
            print(f"\n{table} ({len(shown)}{'+' if len(out) > args.rows else ''} rows shown)")
            for row in shown:
                print("  " + " | ".join("NULL" if v is None else str(v) for v in row))
        for label, sql in (("gold", case.sql), ("prediction", args.sql)):
            if sql is None:
                continue
            got = rows_or_none(adapter, sql)
            print(f"\n{label}: " + ("the database refused or failed it" if got is None else f"{len(got)} row(s)"))
            for row in (got or [])[: args.rows]:
                print("  " + " | ".join("NULL" if v is None else str(v) for v in row))
    finally:
        adapter.close()
    return EXIT_OK


def _witness_to_show(kept: Any, gold: Any, sql: str | None) -> tuple[Path, str]:
    """The witness database to show for a case (that of prediction ``sql``, else the first found
    for the case), after a line for each witness found; UserError where there is none."""
    from nl2sql_assets.errors import UserError
    from nl2sql_assets.evaluation.neighbours.witness import FOLDER, prediction_digest, witness_sidecars

    found = [r for r in witness_sidecars(kept.home) if r.gold == gold.key or r.gold_sql == gold.sql]
    if sql is not None:
        found = [r for r in found if prediction_digest(r.predicted_sql) == prediction_digest(sql)]
    if not found:
        what = "this prediction" if sql is not None else "any prediction of this case"
        raise UserError(f"no witness found for {what} in {kept.home / FOLDER} (a witness is searched for when a "
                        "pass holds on every kept neighbour: eval grade or eval run with neighbours; give N to see "
                        "a kept neighbour)")
    for record in found:
        print(f"witness {record.file}: {' '.join(record.predicted_sql.split())[:120]}  "
              f"[{', '.join(record.kinds)}; built by {', '.join(record.strategies)}; tried {record.tried}]")
    first = found[0]
    path = kept.home / FOLDER / (first.file or "")
    print(f"\n{gold.key.split('/')[-1]} on the witness {path} (set {kept.manifest.key}): "
          f"{', '.join(f'{t} {n}' for t, n in first.rows.items() if n)} rows")
    return path, first.predicted_sql
