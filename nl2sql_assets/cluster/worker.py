"""The Celery app a worker runs: ``celery -A nl2sql_assets.cluster.worker worker -Q dagster``.

It is dagster-celery's step task on the profile's broker and backend (``NL2SQL_CELERY_*``), so a
worker on any machine that reaches Redis, Postgres and the datasources can take any step.
"""

from __future__ import annotations

from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_task

from nl2sql_assets.cluster.settings import ClusterSettings

_settings = ClusterSettings.from_env()
app = make_app({"broker": _settings.broker, "backend": _settings.backend,
                "config_source": _settings.celery_config()})
execute_plan = create_task(app)
