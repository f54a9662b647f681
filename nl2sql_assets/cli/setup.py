"""``init`` (a working demo project folder, on files or on a database server) and ``data`` (the
project's demo databases made where they are missing)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from nl2sql_assets.cli.common import CHINOOK_HELP, add_command, project_config_path


def add(sub: Any) -> None:
    init = add_command(
        sub, "init", _cmd_init, help="write a working demo project folder",
        description="Write a demo project into DIR: nl2sql.yaml, evals.yaml, the suites, and the demo's "
                    "databases (Chinook and two generated DuckDB files, or, with --database, their tables "
                    "copied into a Postgres or MySQL/MariaDB server and the suites translated into its SQL). "
                    "It then runs alone: cd DIR && nl2sql-assets eval run --mode plans. Exit 2 where DIR holds "
                    "a project already (--force overwrites it) or Chinook cannot be found.")
    init.add_argument("--demo", metavar="DIR", required=True, help="the folder to write the demo project into")
    init.add_argument("--chinook", metavar="PATH", default=None, help=CHINOOK_HELP)
    init.add_argument("--force", action="store_true", help="overwrite an existing project in DIR (and, with "
                      "--database, the demo's schemas or databases on that server)")
    init.add_argument("--database", metavar="URL", default=None,
                      help="put the demo's databases on this Postgres or MySQL/MariaDB server "
                           "(postgresql://USER@HOST:PORT/DB, mysql://USER@HOST:PORT/DB) and its suites in its dialect")

    data = add_command(
        sub, "data", _cmd_data, help="make sure the project's demo databases exist",
        description="Make the demo databases nl2sql.yaml names where they are missing (Chinook copied from "
                    "--chinook, $NL2SQL_CHINOOK or the user cache, else downloaded once and its SHA-256 checked; "
                    "the DuckDB files generated) and print each datasource's file. Exit 2 where Chinook cannot "
                    "be found.")
    data.add_argument("--chinook", metavar="PATH", default=None, help=CHINOOK_HELP)


def _cmd_init(args: argparse.Namespace) -> int:
    from nl2sql_assets.demo import init_demo

    demo = init_demo(Path(args.demo), chinook=Path(args.chinook) if args.chinook else None, force=args.force,
                     database=args.database)
    print(f"demo project written to {demo.root}")
    if demo.server is not None:
        server = demo.server
        for ds, cfg in server.datasources.items():
            where = ", ".join(cfg.schemas) if cfg.schemas else cfg.database
            print(f"  {ds}: {server.tables[ds]} tables, {server.rows[ds]} rows copied into {where} ({server.engine})")
        print(f"  suites translated into {server.engine}'s SQL and their rows regenerated there: "
              + ", ".join(f"{name} {n}" for name, n in server.translated.items() if n))
        for key, why in server.differences.items():
            print(f"  differs from the original: {key}: {why}")
        if server.export:
            print(f"the URL carries a password, so nl2sql.yaml reads it from the environment: {server.export}")
    print(f"next: cd {demo.root} && nl2sql-assets eval run --mode plans")
    return 0


def _cmd_data(args: argparse.Namespace) -> int:
    from nl2sql_assets.demo import ensure_demo_data
    from nl2sql_assets.project import load_project_config

    config = load_project_config(project_config_path(args))
    for ds_id, path in ensure_demo_data(config, chinook=Path(args.chinook) if args.chinook else None).items():
        print(f"{ds_id}: {path}")
    return 0
