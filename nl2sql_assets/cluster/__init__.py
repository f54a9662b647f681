"""The cluster profile: Dagster on Postgres, steps on Celery workers (Redis), shared results.

``settings`` reads the profile from the environment (no Dagster import); ``worker`` is the
Celery app the workers start (``celery -A nl2sql_assets.cluster.worker worker``); ``celery_steps``
is the profile's Celery executor. Not under ``defs/``, whose every module Dagster imports: the
embedded profile must import no cluster library.
"""
