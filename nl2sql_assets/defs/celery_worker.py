"""The Celery app a worker runs: ``celery -A nl2sql_assets.defs.celery_worker worker -Q dagster``.

It is dagster-celery's step task on the profile's broker and backend (``NL2SQL_CELERY_*``), so a
worker on any machine that reaches Redis, Postgres and the datasources can take any step. The app
is made when Celery asks for it (``app``), not when Dagster imports defs/ in the embedded profile.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def _app() -> tuple[Any, Any]:
    from dagster_celery.make_app import make_app
    from dagster_celery.tasks import create_task

    from nl2sql_assets.cluster.settings import ClusterSettings

    settings = ClusterSettings.from_env()
    app = make_app({"broker": settings.broker, "backend": settings.backend,
                    "config_source": settings.celery_config()})
    return app, create_task(app)


def __getattr__(name: str) -> Any:
    if name == "app":
        return _app()[0]
    if name == "execute_plan":
        return _app()[1]
    raise AttributeError(name)
