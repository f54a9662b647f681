"""``dashboard``: the results page over the benchmark records and the warehouse's boards."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from nl2sql_assets.cli.common import add_command, project_config_path
from nl2sql_assets.errors import UserError


def add(sub: Any) -> None:
    dash = add_command(
        sub, "dashboard", _cmd_dashboard,
        help="write the results dashboard: one self-contained HTML page over the benchmark records and the "
             "warehouse's boards",
        description="Write one HTML page (plotly inlined: it opens from a file and fetches nothing) over the "
                    "project's benchmark records and stored boards: accuracy over time, two runs case by case, "
                    "cost against accuracy, failure reasons, neighbour overturns and the gold audit. Exit 2 "
                    "where no stored run is found.")
    dash.add_argument("--out", metavar="FILE", default=None,
                      help="the page to write (default: warehouse/dashboard.html in the project)")
    dash.add_argument("--from", dest="sources", nargs="+", metavar="DIR", default=None,
                      help="folders to read: a warehouse (a folder holding reports/) or a folder of benchmark "
                           "records (default: the project's benchmarks/ and warehouse)")
    dash.add_argument("--suite", default=None, metavar="NAME", help="only this suite's runs and cases")


def _cmd_dashboard(args: argparse.Namespace) -> int:
    """Write the results page from the records and boards found, and say what it holds."""
    from nl2sql_assets.atomic import atomic_write
    from nl2sql_assets.evaluation.history import Warehouse
    from nl2sql_assets.evaluation.history.dashboard import build_dashboard, render_html
    from nl2sql_assets.project import load_project_config

    config_path = project_config_path(args)
    config = load_project_config(config_path) if config_path.is_file() else None
    root = config_path.parent
    if args.sources:
        folders = [Path(p) for p in args.sources]
        missing = [str(p) for p in folders if not p.is_dir()]
        if missing:
            raise UserError(f"--from: no such folder: {', '.join(missing)} (give a warehouse folder, one holding "
                            "reports/, or a folder of benchmark records)")
        warehouses = [p for p in folders if (p / "reports").is_dir()]
        records = [p for p in folders if p not in warehouses]
    else:
        warehouses = [Warehouse.for_project(root).root]
        records = [root / "benchmarks"] if (root / "benchmarks").is_dir() else []
    suites = [Path(p) for p in config.evals_config.suites] if config is not None else []
    data = build_dashboard(records, [w for w in warehouses if w.is_dir()], suites, only_suite=args.suite, root=root)
    if not data.runs:
        raise UserError(f"no stored run in {', '.join(str(p) for p in [*records, *warehouses]) or 'the project'}: "
                        "`nl2sql-assets eval run` (or the Dagster scoreboards) stores runs, `eval publish` records them")
    out = Path(args.out) if args.out else Warehouse.for_project(root).root / "dashboard.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    page = render_html(data)
    atomic_write(out, page)
    print(f"dashboard: {out} ({len(page) / 1e6:.1f} MB; {len(data.runs)} run(s), {len(data.cases)} case(s)); "
          "open it in a browser, nothing is fetched")
    return 0
