"""``ui``: the Dagster UI on the project."""

from __future__ import annotations

import argparse
from typing import Any

from nl2sql_assets.cli.common import add_command, project_config_path


def add(sub: Any) -> None:
    ui = add_command(
        sub, "ui", _cmd_ui,
        help="start the Dagster UI on the project (dagster dev): one line when it is ready, the terminal at one "
             "log level, runs launched from the UI included",
        description="Start dagster dev on the project's code location and print one line with the address once "
                    "the UI answers. The project's Dagster runs are kept in $DAGSTER_HOME, else in its own "
                    ".dagster_home/. Ctrl-C, SIGTERM or SIGHUP stop the whole tree (the webserver, the daemon "
                    "and the code servers). Exit 2 when the project is missing or the port is taken.")
    ui.add_argument("--log-level", choices=("debug", "info", "warning", "error", "critical"), default="warning",
                    help="the least severe log line the terminal shows (the UI keeps every event)")
    ui.add_argument("--host", default="127.0.0.1", help="the address the UI listens on")
    ui.add_argument("--port", type=int, default=3000, help="the port the UI listens on")


def _cmd_ui(args: argparse.Namespace) -> int:
    from nl2sql_assets.ui import run_ui

    return run_ui(project_config_path(args), args.log_level, args.host, args.port)
