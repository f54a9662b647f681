"""The cluster profile's settings, from environment variables (the same on every machine).

``NL2SQL_PROFILE=cluster`` turns the profile on (steps on Celery workers); ``NL2SQL_PROFILE=k8s`` is
the same shared storage with each step a Kubernetes Job (dagster-k8s, ``deploy/k8s/``). Without
either the project runs embedded (SQLite, in-process), exactly as before. Defaults suit one machine
with the local services: Postgres on 127.0.0.1:5432 (trust auth) and Redis on 127.0.0.1:6379.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

from nl2sql_assets.config import StrictModel

#: Cases per shard step (x3 roles = 1,500 case runs). scripts/bench_cluster.py (docs/performance.md,
#: "A cluster at scale"): a shard step costs its worker about 1 CPU s beyond its case runs with a
#: 2,000-case suite and 6-7.5 s with a 16,667-case one (each step loads the whole suite; set a
#: larger NL2SQL_SHARD_SIZE for such suites), against about 14 CPU ms per key-free case run. At 500
#: cases that launch cost is 5% of a step with the smaller suite (20% at 100); larger shards save little more, balance worse over the workers (3 shards on 2
#: workers left a fifth of their time idle), lose more to a killed worker, and must stay under
#: the visibility timeout (600 s; a model-bound mode full shard of 500 cases at concurrency 8 and
#: 1 s per case run takes about 190 s).
DEFAULT_SHARD_SIZE = 500

PROFILE_VARIABLE = "NL2SQL_PROFILE"
#: The profiles that share Postgres and shard case_runs; each names its step executor
#: (nl2sql_assets.defs.cluster.STEP_EXECUTORS).
SHARED_PROFILES = ("cluster", "k8s")


class ClusterSettings(StrictModel):
    """Where the shared services are and how a partition is cut into shards."""

    #: Which executor takes the steps: ``cluster`` (Celery workers) or ``k8s`` (a Job per step).
    profile: Literal["cluster", "k8s"] = "cluster"
    pg_dsn: str = "host=127.0.0.1 port=5432 dbname=test user=postgres"
    pg_schema: str = "nl2sql"
    broker: str = "redis://127.0.0.1:6379/0"
    backend: str = "redis://127.0.0.1:6379/0"
    queue: str = "dagster"
    #: Put before every Redis key Celery writes (queues, unacknowledged steps, results), so clusters
    #: sharing one Redis database never see, redeliver or clear each other's steps.
    key_prefix: str = ""
    #: Cases per shard step (NL2SQL_SHARD_SIZE); see DEFAULT_SHARD_SIZE for why 500.
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
    """The shared settings when ``NL2SQL_PROFILE`` is ``cluster`` or ``k8s``, else None (the
    embedded default)."""
    value = environ.get(PROFILE_VARIABLE, "").strip()
    if value in ("", "embedded"):
        return None
    if value not in SHARED_PROFILES:
        names = [SHARED_PROFILES[0], "embedded", *SHARED_PROFILES[1:]]
        raise ValueError(f"{PROFILE_VARIABLE}={value!r}: expected " + " or ".join(repr(n) for n in names))
    return ClusterSettings.from_env(environ).model_copy(update={"profile": value})
