"""The cluster profile's settings, from environment variables (the same on every machine).

``NL2SQL_PROFILE=cluster`` turns the profile on; without it the project runs embedded (SQLite,
in-process), exactly as before. Defaults suit one machine with the local services: Postgres on
127.0.0.1:5432 (trust auth) and Redis on 127.0.0.1:6379.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from nl2sql_assets.config import StrictModel

DEFAULT_SHARD_SIZE = 100

PROFILE_VARIABLE = "NL2SQL_PROFILE"


class ClusterSettings(StrictModel):
    """Where the shared services are and how a partition is cut into shards."""

    pg_dsn: str = "host=127.0.0.1 port=5432 dbname=test user=postgres"
    pg_schema: str = "nl2sql"
    broker: str = "redis://127.0.0.1:6379/0"
    backend: str = "redis://127.0.0.1:6379/0"
    queue: str = "dagster"
    #: Put before every Redis key Celery writes (queues, unacknowledged steps, results), so clusters
    #: sharing one Redis database never see, redeliver or clear each other's steps.
    key_prefix: str = ""
    #: Cases per shard step. bench_cluster.py measured a step at 1.8 s + 30 ms per case run (mode
    #: plans, 3 roles a case): 100 cases keeps the launch cost near 17% of a key-free shard and
    #: far less where each case run waits seconds for a model.
    shard_size: int = DEFAULT_SHARD_SIZE
    #: Redis hands an unacknowledged step to another worker after this long: a killed worker's
    #: step runs again. Keep it above the longest shard, or a slow shard runs twice.
    visibility_timeout_s: int = 600
    #: An open spend reservation older than this counts as spent (its worker is presumed dead).
    stale_reservation_s: float = 900.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> ClusterSettings:
        names = {
            "pg_dsn": "NL2SQL_PG_DSN", "pg_schema": "NL2SQL_PG_SCHEMA", "broker": "NL2SQL_CELERY_BROKER",
            "backend": "NL2SQL_CELERY_BACKEND", "queue": "NL2SQL_CELERY_QUEUE", "shard_size": "NL2SQL_SHARD_SIZE",
            "key_prefix": "NL2SQL_CELERY_KEY_PREFIX",
            "visibility_timeout_s": "NL2SQL_VISIBILITY_TIMEOUT_S",
            "stale_reservation_s": "NL2SQL_STALE_RESERVATION_S",
        }
        return cls.model_validate({field: environ[var] for field, var in names.items() if environ.get(var)})

    def celery_config(self) -> dict:
        """Celery settings: a step is acknowledged only when it finished, so a worker that dies
        mid-step gives it back to the queue; one step per worker at a time. Workers look for
        steps left unacknowledged past the visibility timeout every tenth of it (1-60 s; kombu's
        default sweep is every 100 s, which would leave a killed worker's step waiting)."""
        transport: dict = {"visibility_timeout": self.visibility_timeout_s,
                           "unacked_restore_interval": max(1, min(60, self.visibility_timeout_s // 10)),
                           "unacked_restore_throttle": 1}
        if self.key_prefix:
            transport["global_keyprefix"] = self.key_prefix
        return {
            "task_acks_late": True,
            "task_reject_on_worker_lost": True,
            "worker_prefetch_multiplier": 1,
            "task_default_queue": self.queue,
            "broker_transport_options": transport,
            "result_backend_transport_options": dict(transport),
        }


def cluster_profile(environ: Mapping[str, str] = os.environ) -> ClusterSettings | None:
    """The cluster settings when ``NL2SQL_PROFILE=cluster``, else None (the embedded default)."""
    value = environ.get(PROFILE_VARIABLE, "").strip()
    if value in ("", "embedded"):
        return None
    if value != "cluster":
        raise ValueError(f"{PROFILE_VARIABLE}={value!r}: expected 'cluster' or 'embedded'")
    return ClusterSettings.from_env(environ)
