"""NL2SQL_PROFILE=k8s: the definitions load with dagster-k8s' k8s_job_executor and the sharded
case_runs (no Kubernetes needed to load them), while the embedded default imports none of the
cluster libraries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nl2sql_assets.cluster.settings import cluster_profile

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_MODULES = ("dagster_k8s", "kubernetes", "dagster_celery", "celery", "psycopg2", "dagster_postgres")

LOAD = """
import json, sys
import nl2sql_assets.definitions as d
defs = d.defs()
jobs = defs.resolve_all_job_defs()
case_runs = next(a for a in defs.resolve_all_asset_specs() if a.key.path == ["chinook", "case_runs"])
graph = defs.resolve_assets_def(case_runs.key).node_def
print(json.dumps({
    "executors": sorted({(j.executor_def.name, j.executor_def.executor_creation_fn.__module__) for j in jobs}),
    "case_runs_ops": sorted(n.name for n in getattr(graph, "nodes", [])),
    "modules": sorted(m for m in sys.argv[1:] if m in sys.modules),
}))
"""


def _load(profile: str, project: Path) -> dict:
    env = {**os.environ, "NL2SQL_PROFILE": profile, "NL2SQL_PROJECT": str(project / "nl2sql.yaml")}
    proc = subprocess.run([sys.executable, "-c", LOAD, *CLUSTER_MODULES], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_k8s_profile_loads_with_the_k8s_job_executor_and_shards(demo_project: Path):
    loaded = _load("k8s", demo_project)
    # every job: dagster-k8s' k8s_job_executor (named "k8s"), one Kubernetes Job per step
    assert loaded["executors"] == [["k8s", "dagster_k8s.executor"]]
    assert loaded["case_runs_ops"] == ["chinook_merge_shards", "chinook_run_shard", "chinook_split_cases"]
    assert "dagster_k8s" in loaded["modules"]


def test_the_embedded_profile_imports_no_cluster_library(demo_project: Path):
    loaded = _load("embedded", demo_project)
    assert [name for name, _ in loaded["executors"]] == ["in_process"]
    assert loaded["case_runs_ops"] == []  # the one-step asset, not a graph
    assert loaded["modules"] == []


def test_the_profile_variable_selects_the_executor_or_is_refused():
    assert cluster_profile({}) is None
    assert cluster_profile({"NL2SQL_PROFILE": "embedded"}) is None
    assert cluster_profile({"NL2SQL_PROFILE": "cluster"}).profile == "cluster"
    k8s = cluster_profile({"NL2SQL_PROFILE": "k8s", "NL2SQL_SHARD_SIZE": "7"})
    assert (k8s.profile, k8s.shard_size) == ("k8s", 7)
    with pytest.raises(ValueError, match="expected 'cluster' or 'embedded' or 'k8s'"):
        cluster_profile({"NL2SQL_PROFILE": "swarm"})


def test_the_helm_values_match_the_code_and_the_celery_profile():
    """deploy/k8s/values.yaml: the code location runs this profile with the same Postgres settings
    the code reads, and the run queue, retries and run monitoring (freeing a dead run's pool slots)
    are as in deploy/cluster/dagster.yaml."""
    import yaml

    values = yaml.safe_load((ROOT / "deploy" / "k8s" / "values.yaml").read_text())
    instance = yaml.safe_load((ROOT / "deploy" / "cluster" / "dagster.yaml").read_text())
    (location,) = values["dagster-user-deployments"]["deployments"]
    env = {e["name"]: e.get("value") for e in location["env"]}
    assert env["NL2SQL_PROFILE"] == "k8s"
    assert location["dagsterApiGrpcArgs"] == ["-m", "nl2sql_assets.definitions"]
    assert location["includeConfigInLaunchedRuns"]["enabled"] is True  # step Jobs get the same env
    read = cluster_profile({k: v for k, v in env.items() if v is not None})
    assert read.pg_dsn == env["NL2SQL_PG_DSN"] and read.pg_schema == env["NL2SQL_PG_SCHEMA"]
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    queue = values["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    runs = instance["concurrency"]["runs"]
    assert queue["maxConcurrentRuns"] == runs["max_concurrent_runs"]
    assert queue["tagConcurrencyLimits"] == runs["tag_concurrency_limits"]
    assert values["dagsterDaemon"]["runRetries"]["maxRetries"] == instance["run_retries"]["max_retries"]
    monitoring = values["dagsterDaemon"]["runMonitoring"]
    assert monitoring["enabled"] is instance["run_monitoring"]["enabled"] is True
    assert monitoring["startTimeoutSeconds"] == instance["run_monitoring"]["start_timeout_seconds"]
    assert monitoring["freeSlotsAfterRunEndSeconds"] == instance["run_monitoring"]["free_slots_after_run_end_seconds"]
