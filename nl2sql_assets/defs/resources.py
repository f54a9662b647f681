"""The one resource: the project (nl2sql.yaml) the assets work on, and its warehouse; with it, the
secret parts of its server datasources, each from the environment variable nl2sql.yaml names."""


import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
from pydantic import Field

from nl2sql_assets.config import ProjectConfig
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


class DatabaseSecrets(dg.ConfigurableResource):
    """The URLs and passwords of the project's server datasources, by the environment variable each
    datasource names (``url_env``, ``password_env``), given as Dagster's ``EnvVar``: the UI and a
    run's config show the variable, never its value, and a run whose variable is unset fails before
    its first step, naming it."""

    values: dict[str, str] = Field(default_factory=dict)


def database_secrets(config: ProjectConfig) -> DatabaseSecrets:
    """The project's ``DatabaseSecrets``: one ``EnvVar`` per variable its datasources name."""
    names = sorted({v for ds in config.datasources for v in (ds.url_env, ds.password_env) if v})
    return DatabaseSecrets(values={name: dg.EnvVar(name) for name in names})  # type: ignore[misc]


class ProjectResource(dg.ConfigurableResource):
    """Opens the project for one step and closes its database connections afterwards."""

    config_path: str
    secrets: DatabaseSecrets

    @contextlib.contextmanager
    def open(self) -> Iterator:
        from nl2sql_assets.project import Project

        # the values Dagster resolved are where the datasources read them (the same process's
        # environment, unless a run worker was given them by its run's config)
        os.environ.update(self.secrets.values)
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
