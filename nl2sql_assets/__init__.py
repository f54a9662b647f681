"""nl2sql-assets: evaluate NL2SQL engines case by case, with honest statistics, as Dagster assets."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from nl2sql_assets.version import __version__

if TYPE_CHECKING:
    from nl2sql_assets.project import Project

__all__ = ["Project", "__version__"]


def __getattr__(name: str) -> Any:
    # Imported on first use so ``import nl2sql_assets`` stays cheap.
    if name == "Project":
        from nl2sql_assets.project import Project

        return Project
    raise AttributeError(name)
