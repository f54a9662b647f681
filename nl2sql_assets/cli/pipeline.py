"""``pipeline run``: the key-free evaluation through Dagster, each suite's board in one line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from nl2sql_assets.cli.common import (
    CHINOOK_HELP,
    add_command,
    add_group,
    board_line,
    dagster_instance,
    project_config_path,
    say,
)


def add(sub: Any) -> None:
    from nl2sql_assets.evaluation.running.modes import key_free_configs

    psub = add_group(sub, "pipeline", help="the key-free evaluation through Dagster",
                     description="The key-free evaluation as Dagster assets, materialised in-process.",
                     dest="pipeline_command")
    prun = add_command(
        psub, "run", _cmd_pipeline,
        help="check the data, then materialise datasets, case runs, scoreboards (with the gate) and the reports "
             "(what scripts/main runs)",
        description="Check the project, Chinook and the demo data, then materialise every asset of the key-free "
                    "configs in the project's Dagster instance ($DAGSTER_HOME, else the project's own "
                    ".dagster_home/): datasets, case runs, scoreboards with their gate, the reports and the "
                    "results dashboards under warehouse/. Prints each run, each check and each suite's board in "
                    "one line. Exit 0 when every run and check passed, 1 when one failed, 2 on bad input.")
    prun.add_argument("--configs", nargs="+", default=None, metavar="NAME",
                      help=f"the configs to run (default: the key-free ones, {' '.join(key_free_configs())})")
    prun.add_argument("--pass", dest="pass_index", type=int, default=1, metavar="N",
                      help="which pass partition to materialise")
    prun.add_argument("--chinook", metavar="PATH", default=None, help=CHINOOK_HELP)


def _cmd_pipeline(args: argparse.Namespace) -> int:
    from nl2sql_assets.demo import ensure_demo_data
    from nl2sql_assets.project import load_project_config

    # Preflight: the project, Chinook and the demo data first, so a missing piece is one message
    # and no Dagster run is started (a failed run would stay in the UI's run list).
    config_path = project_config_path(args).resolve()
    config = load_project_config(config_path)
    ensure_demo_data(config, chinook=Path(args.chinook) if args.chinook else None,
                     on_download=lambda url: say(f"Chinook is not cached yet: downloading it once from {url}"))
    from nl2sql_assets.yamlio import no_cyclic_gc

    # Importing Dagster and our definitions, and opening the instance, make some 200,000 objects
    # and no garbage worth a collection: without the cyclic collector meanwhile (its full
    # collections over that growing heap cost 0.3 s of CPU here); run_keyfree then keeps them out
    # of its collections (frozen_heap).
    with no_cyclic_gc():
        from nl2sql_assets.defs.automation import NIGHTLY_CONFIGS
        from nl2sql_assets.defs.keyfree import run_keyfree

        instance = dagster_instance(config_path)
    with instance:
        run = run_keyfree(config_path, instance, configs=tuple(args.configs or NIGHTLY_CONFIGS),
                          pass_index=args.pass_index)
    for name, ok in run.runs.items():
        print(f"{'ok    ' if ok else 'FAILED'} {name}")
    for name, passed in run.checks.items():
        print(f"check {'passed' if passed else 'FAILED'}: {name}")
    if run.stopped_after:
        print(f"stopped after {run.stopped_after} failed; the runs that depend on it were not started "
              f"(its log: `dagster dev`, Runs)", file=sys.stderr)
    from nl2sql_assets.evaluation.running import get_mode

    for name, report in run.boards.items():
        for board in report.configs.values():
            print(f"scoreboard {name}: {board_line(board, get_mode(report.mode).executes, report.mode)}")
    _next_steps(config, run)
    return 0 if run.ok else 1


def _next_steps(config: Any, run: Any) -> None:
    """What a user reads the run with: each suite's report, and the UI holding the runs."""
    from nl2sql_assets.evaluation.history import Warehouse

    warehouse = Warehouse.for_project(config.root)
    suites = sorted({name.split("/")[0] for name in run.boards})
    reports = [warehouse.suite_report_path(s) for s in suites if warehouse.suite_report_path(s).is_file()]
    if reports:
        shown = reports[0].parent.parent / "<suite>" / reports[0].name if len(reports) > 1 else reports[0]
        pages = sorted((warehouse.root / "dashboards").glob("*.html"))
        dashboards = (f"; open the results dashboard{'s' if len(pages) > 1 else ''} in a browser: "
                      f"{pages[0].parent / '<suite>.html' if len(pages) > 1 else pages[0]}") if pages else ""
        print(f"\nnext: the reports across configs are {shown} ({len(reports)} suite(s)){dashboards}; the UI holds "
              f"these runs: source scripts/_env.sh && nl2sql-assets ui (it prints the address when the UI is ready)")
