"""Where the boards' assets read and leave a suite's passes and scoreboards: the project's file
warehouse embedded; under a shared profile (``NL2SQL_PROFILE=cluster``) the Postgres copy too, so
any machine sees what every other built. The embedded and the sharded case runs both use these."""

from __future__ import annotations

from typing import Any

from nl2sql_assets.cluster.settings import cluster_profile
from nl2sql_assets.defs.resources import ProjectResource


def shared_records(project: ProjectResource) -> Any:
    """Where boards read a suite's stored passes: the Postgres copy under a shared profile (any
    machine sees every partition's records), else the project's file warehouse."""
    settings = cluster_profile()
    if settings is None:
        return project.warehouse
    from nl2sql_assets.evaluation.history.pg_warehouse import PgCaseRecords

    return PgCaseRecords(settings.pg_dsn, schema=settings.pg_schema)


def share_scoreboard(project: ProjectResource, suite_name: str, config: str) -> None:
    """Under a shared profile, copy a config's saved scoreboard into Postgres for other machines."""
    if cluster_profile() is None:
        return
    path = project.warehouse.scoreboard_path(suite_name, config)
    shared_records(project).write_scoreboard(suite_name, config, path.read_text(encoding="utf-8"))


def pull_scoreboards(project: ProjectResource, suite_name: str) -> None:
    """Under a shared profile, write every scoreboard stored in Postgres to this machine's
    warehouse files, so the gate and the records (which read those files) see the boards any
    machine built. Nothing to do embedded: the files are the boards."""
    if cluster_profile() is None:
        return
    from nl2sql_assets.atomic import atomic_write

    for config, text in shared_records(project).read_scoreboards(suite_name).items():
        path = project.warehouse.scoreboard_path(suite_name, config)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            atomic_write(path, text)
