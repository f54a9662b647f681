"""`nl2sql-assets ui`: the terminal filtered by level (a record's continuation lines follow it),
the code location it starts, and the errors before anything starts."""

import io
from pathlib import Path

import pytest
import yaml

from nl2sql_assets.cli import main
from nl2sql_assets.ui import LevelFilter, copy_filtered, dagster_dev_command, workspace_yaml

DEBUG = "2026-12-04 18:33:37 +0000 - dagster - DEBUG - case_runs_job - 5713b33d - 19078 - STEP_START - Started\n"
INFO = "2026-12-04 18:33:37 +0000 - dagster.daemon.SensorDaemon - INFO - Checking for new runs for sensor\n"
WARNING = "2026-12-04 18:33:37 +0000 - dagster - WARNING - case_runs_job - 5713b33d - chinook_case_runs - slow\n"
ERROR = "2026-12-04 18:33:37 +0000 - dagster-webserver - ERROR - something broke\n"
COLOURED_DEBUG = "\x1b[32m2026-12-04 18:33:37 +0000\x1b[0m - dagster - \x1b[34mDEBUG\x1b[0m - run - x - STEP_OUTPUT\n"


@pytest.mark.parametrize(("level", "lines", "shown"), [
    ("warning", [DEBUG, INFO, WARNING, ERROR], [WARNING, ERROR]),
    ("info", [DEBUG, INFO, WARNING], [INFO, WARNING]),
    ("debug", [DEBUG, INFO], [DEBUG, INFO]),
    ("error", [WARNING, ERROR], [ERROR]),
    ("critical", [ERROR], []),
    ("warning", [COLOURED_DEBUG, WARNING], [WARNING]),  # colour codes do not hide the level
    # a traceback follows its record: shown after an ERROR, dropped after a DEBUG
    ("warning", [ERROR, "Traceback (most recent call last):\n", '  File "x.py"\n', DEBUG, "  detail\n"],
     [ERROR, "Traceback (most recent call last):\n", '  File "x.py"\n']),
    # what comes before any record (click's own messages) is shown
    ("warning", ["Aborted!\n", DEBUG], ["Aborted!\n"]),
    ("WARNING", [INFO, WARNING], [WARNING]),
])
def test_the_terminal_shows_records_at_or_above_the_level(level, lines, shown):
    out = io.StringIO()
    copy_filtered(lines, LevelFilter(level), out)
    assert out.getvalue() == "".join(shown)


def test_the_workspace_names_the_code_location_runs_are_filed_under(tmp_path: Path):
    from nl2sql_assets.defs.keys import CODE_LOCATION

    project = tmp_path / "it's a project"
    workspace = yaml.safe_load(workspace_yaml(project / "nl2sql.yaml"))
    (entry,) = workspace["load_from"]
    assert entry["python_module"] == {"module_name": "nl2sql_assets.definitions",
                                      "working_directory": str(project), "location_name": CODE_LOCATION}
    command = dagster_dev_command(tmp_path / "w.yaml", "warning", "127.0.0.1", 3100)
    assert command[1:] == ["-m", "dagster", "dev", "-w", str(tmp_path / "w.yaml"), "--log-level", "warning",
                           "-h", "127.0.0.1", "-p", "3100"]


def test_ui_without_a_project_says_what_to_do(tmp_path: Path, capsys):
    """(Without DAGSTER_HOME a project keeps its runs in its own .dagster_home/: test_signals.)"""
    assert main(["--config", str(tmp_path / "missing"), "ui"]) == 2
    assert "config file not found" in capsys.readouterr().err
