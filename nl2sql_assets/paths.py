"""Where the package's own files are, in a wheel install and in a checkout (editable install)."""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def packaged_suites_dir() -> Path:
    """The suites the package ships: ``nl2sql_assets/suites`` in a wheel, the top-level
    ``suites/`` of a checkout (the same files; the wheel build copies them in)."""
    inside = PACKAGE_DIR / "suites"
    return inside if inside.is_dir() else PACKAGE_DIR.parent / "suites"


def chinook_suite_path() -> Path:
    return packaged_suites_dir() / "chinook.yaml"


def is_packaged(path: str | Path) -> bool:
    """True when ``path`` is one of the suites the package ships."""
    try:
        Path(path).resolve().relative_to(packaged_suites_dir().resolve())
    except ValueError:
        return False
    return True


def repo_root() -> Path | None:
    """The checkout holding the package, found by walking up to ``.git``; None for a wheel."""
    for parent in [PACKAGE_DIR, *PACKAGE_DIR.parents]:
        if (parent / ".git").exists():
            return parent
    return None
