"""Where a project's warehouse lies, where the package's own files are, in a wheel install and in a checkout (editable install), and
which commit of the checkout is running."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Literal

PACKAGE_DIR = Path(__file__).resolve().parent


def warehouse_dir(project_root: str | Path) -> Path:
    """A project's warehouse of runs: ``warehouse/`` beside its nl2sql.yaml."""
    return Path(project_root) / "warehouse"


def schema_index_in(warehouse: str | Path) -> Path:
    """Where each datasource's schema index is kept inside a warehouse (the engine's retriever reads them)."""
    return Path(warehouse) / "schema_index"


def neighbours_dir(project_root: str | Path) -> Path:
    """Each datasource's kept neighbour databases (``warehouse/neighbours/<datasource>/<key>/``)."""
    return warehouse_dir(project_root) / "neighbours"


def suite_cache_in(warehouse: str | Path) -> Path:
    """Parsed suites by file digest (``suites.cache``), inside a warehouse: a big suite is
    YAML-parsed once."""
    return Path(warehouse) / "cache" / "suites"


def suite_cache_dir(project_root: str | Path) -> Path:
    """The suite cache of a project's warehouse."""
    return suite_cache_in(warehouse_dir(project_root))


def packaged_suites_dir() -> Path:
    """The suites the package ships: ``nl2sql_assets/suites`` in a wheel, the top-level
    ``suites/`` of a checkout (the same files; the wheel build copies them in)."""
    inside = PACKAGE_DIR / "suites"
    return inside if inside.is_dir() else PACKAGE_DIR.parent / "suites"


def instance_settings_file() -> Path:
    """The project's Dagster instance settings: ``nl2sql_assets/dagster_settings/dagster.yaml`` in a
    wheel, ``scripts/dagster.yaml`` of a checkout (the same file; the wheel build copies it in)."""
    inside = PACKAGE_DIR / "dagster_settings" / "dagster.yaml"
    return inside if inside.is_file() else PACKAGE_DIR.parent / "scripts" / "dagster.yaml"


def project_dagster_home(project_root: str | Path) -> Path:
    """The Dagster instance folder a project keeps its runs in when DAGSTER_HOME is not set:
    ``.dagster_home/`` beside its nl2sql.yaml."""
    return Path(project_root) / ".dagster_home"


def chinook_suite_path() -> Path:
    """The 47-case Chinook gold suite (its policy probes and clarify questions are suites of their own)."""
    return packaged_suites_dir() / "chinook.yaml"


def chinook_policy_suite_path() -> Path:
    return packaged_suites_dir() / "chinook_policy.yaml"


def chinook_clarify_suite_path() -> Path:
    return packaged_suites_dir() / "chinook_clarify.yaml"


def wide_routing_suite_path() -> Path:
    """The routing suite of the wide test bed (``nl2sql-assets bench wide``)."""
    return packaged_suites_dir() / "wide_routing.yaml"


def is_packaged(path: str | Path) -> bool:
    """True when ``path`` is one of the suites the package ships."""
    try:
        Path(path).resolve().relative_to(packaged_suites_dir().resolve())
    except ValueError:
        return False
    return True


def repo_root() -> Path | None:
    """The checkout holding the package, found by walking up to ``.git``; None for a wheel (an
    installed copy under site-packages is not the checkout's code, even inside one)."""
    if {"site-packages", "dist-packages"} & set(PACKAGE_DIR.parts):
        return None
    return _find_git_root(PACKAGE_DIR)


def git_info(start: Path | None = None) -> tuple[str, bool | Literal["unknown"]]:
    """The commit of the git checkout at or above ``start`` (a project's root; by default the
    checkout holding the package), and whether tracked files changed. ``("unknown", "unknown")``
    outside git (a wheel install, a project folder no repository holds), without git, or when
    git fails."""
    root = repo_root() if start is None else _find_git_root(start)
    git = shutil.which("git")
    if root is None or git is None:
        return "unknown", "unknown"
    try:
        head = subprocess.run([git, "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
        status = subprocess.run([git, "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown", "unknown"
    if not re.fullmatch(r"[0-9a-f]{7,64}", head):
        return "unknown", "unknown"
    return head, bool(status.strip())


def _find_git_root(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` that holds ``.git``."""
    start = start.resolve()
    for parent in [start, *start.parents]:
        if (parent / ".git").exists():
            return parent
    return None
