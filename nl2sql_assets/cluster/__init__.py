"""The cluster profile: Dagster on Postgres, steps on Celery workers (Redis), shared results.

``settings`` reads the profile from the environment (no Dagster import). Its Dagster glue lives
under ``defs/``: ``defs.celery_worker`` is the Celery app the workers start (``celery -A
nl2sql_assets.defs.celery_worker worker``), ``defs.celery_steps`` the profile's Celery executor,
both importing the cluster's libraries on first use, so the embedded profile pays for none.
"""
