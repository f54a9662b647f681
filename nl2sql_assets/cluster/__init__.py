"""The cluster profile: Dagster on Postgres, steps on Celery workers (Redis), shared results.

``settings`` reads the profile from the environment (no Dagster import); ``worker`` is the
Celery app the workers start (``celery -A nl2sql_assets.cluster.worker worker``).
"""
