"""Where a project's Dagster runs live: ``$DAGSTER_HOME`` when it is set, else the project's own
``.dagster_home/`` (its ``dagster.yaml``, the project's instance settings, written there on first
use, and the folder listed in the project's ``.gitignore``). A project folder made by ``init
--demo`` then runs alone: ``pipeline run`` and ``ui`` need nothing set first.
"""

from __future__ import annotations

import os
from pathlib import Path

from nl2sql_assets.atomic import atomic_write
from nl2sql_assets.paths import instance_settings_file, project_dagster_home

IGNORED = ".dagster_home/"


def dagster_home(project_root: str | Path) -> tuple[Path, str | None]:
    """The Dagster instance folder for a project, set as ``DAGSTER_HOME`` for this process, and
    the line to say first when it is the project's own (None when DAGSTER_HOME was set)."""
    given = os.environ.get("DAGSTER_HOME")
    if given:
        return Path(given), None
    root = Path(project_root).resolve()
    home = project_dagster_home(root)
    home.mkdir(parents=True, exist_ok=True)
    settings = home / "dagster.yaml"
    if not settings.is_file():
        atomic_write(settings, instance_settings_file().read_text(encoding="utf-8"))
    _ignore(root / ".gitignore")
    os.environ["DAGSTER_HOME"] = str(home)
    return home, (f"DAGSTER_HOME is not set: this project's Dagster runs are kept in {home} (its dagster.yaml "
                  "written there on first use; set DAGSTER_HOME to keep them elsewhere)")


def _ignore(gitignore: Path) -> None:
    """``.dagster_home/`` listed in the project's .gitignore (made when there is none)."""
    try:
        text = gitignore.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    if any(line.strip() in (IGNORED, IGNORED.rstrip("/"), "/" + IGNORED) for line in text.splitlines()):
        return
    atomic_write(gitignore, text + ("" if not text or text.endswith("\n") else "\n") + IGNORED + "\n")
