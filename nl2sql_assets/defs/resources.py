"""The one resource: the project (nl2sql.yaml) the assets work on, and its warehouse."""


import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import dagster as dg

from nl2sql_assets.evaluation.history.warehouse import Warehouse
from nl2sql_assets.paths import repo_root


def default_config_path() -> Path:
    """``$NL2SQL_PROJECT``, else ``./nl2sql.yaml``, else the checkout's own ``nl2sql.yaml``."""
    env = os.environ.get("NL2SQL_PROJECT")
    if env:
        return Path(env).expanduser().resolve()
    here = Path.cwd() / "nl2sql.yaml"
    if here.is_file():
        return here.resolve()
    root = repo_root()
    if root is not None and (root / "nl2sql.yaml").is_file():
        return root / "nl2sql.yaml"
    return here


class ProjectResource(dg.ConfigurableResource):
    """Opens the project for one step and closes its database connections afterwards."""

    config_path: str

    @contextlib.contextmanager
    def open(self) -> Iterator:
        from nl2sql_assets.project import Project

        project = Project.load(self.config_path)
        try:
            yield project
        finally:
            project.close()

    @property
    def root(self) -> Path:
        return Path(self.config_path).resolve().parent

    @property
    def warehouse(self) -> Warehouse:
        return Warehouse.for_project(self.root)

    @property
    def benchmarks(self) -> Path:
        return self.root / "benchmarks"
