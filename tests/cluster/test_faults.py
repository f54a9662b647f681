"""Faults of the cluster profile beyond a killed worker (issue 15): a Postgres restart that Dagster's
own run and event storage sees too, and a priced run that really crosses its spend cap.

Both Dagster's storage and our tables reach Postgres through test ports (``PgPort``) that are closed
(every connection dropped, new ones refused) and opened again: a server restart as its clients see
it, without touching the Postgres others share. Two real Celery workers, as in
test_celery_workers.py, in a cluster of this module's own (queue, key prefix, schema)."""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from nl2sql_assets.defs.factory import build_defs
from nl2sql_assets.defs.keys import case_runs_key
from nl2sql_assets.defs.partitions import config_pass_key, register_configs
from nl2sql_assets.evaluation.history.warehouse import Warehouse
from tests.cluster.conftest import Cluster, open_cluster, with_routing_suite
from tests.cluster.test_celery_workers import SUITES, _launch, _materializations, _records

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

OUTAGE_S = float(os.environ.get("FAULTS_OUTAGE_S", "12"))  # longer than dagster-postgres retries (5 tries, ~6 s)


@pytest.fixture(scope="module")
def fault_cluster(tmp_path_factory: pytest.TempPathFactory, demo_template: Path, pg_database: str) -> Iterator[Cluster]:
    with open_cluster(tmp_path_factory.mktemp("faults"), demo_template, pg_database,
                      schema=f"faults_{uuid.uuid4().hex[:8]}", dagster_through_port=True) as c:
        yield c


@pytest.fixture(scope="module")
def fault_instance(fault_cluster: Cluster) -> dg.DagsterInstance:
    instance = dg.DagsterInstance.get()  # storage on Postgres, through fault_cluster.dagster_port
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    assert f":{fault_cluster.dagster_port.port}/" in os.environ["NL2SQL_DAGSTER_PG_URL"]
    register_configs(instance, ["retrieval"])
    defs = build_defs(fault_cluster.project / "nl2sql.yaml")
    assert defs.resolve_job_def("datasets_job").execute_in_process(instance=instance).success
    return instance


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory: pytest.TempPathFactory, demo_template: Path) -> Path:
    """retrieval|2 run the embedded way (in-process, no profile): the records a disturbed run must end with."""
    project = tmp_path_factory.mktemp("undisturbed") / "demo"
    shutil.copytree(demo_template, project)
    with_routing_suite(project)
    saved = os.environ.pop("NL2SQL_PROFILE", None)
    try:
        defs = build_defs(project / "nl2sql.yaml")
        with dg.instance_for_test(temp_dir=str(tmp_path_factory.mktemp("undisturbed_home"))) as instance:
            register_configs(instance, ["retrieval"])
            assert defs.resolve_job_def("datasets_job").execute_in_process(instance=instance).success
            assert defs.resolve_job_def("case_runs_job").execute_in_process(
                instance=instance, partition_key=config_pass_key("retrieval", 2),
                asset_selection=[case_runs_key(s) for s in SUITES["retrieval"]]).success
    finally:
        if saved is not None:
            os.environ["NL2SQL_PROFILE"] = saved
    return project


def _wait_for_shard_start(cluster: Cluster, before: int, deadline: float) -> None:
    logs = [cluster.logs / f"{name}.log" for name in cluster.workers]
    pattern = re.compile(r'STEP_START - Started execution of step "\w+_case_runs\.\w+_run_shard')
    while sum(len(pattern.findall(log.read_text(errors="replace"))) for log in logs) == before:
        assert time.monotonic() < deadline, "no shard started"
        time.sleep(0.02)


def _shard_starts(cluster: Cluster) -> int:
    pattern = re.compile(r'STEP_START - Started execution of step "\w+_case_runs\.\w+_run_shard')
    return sum(len(pattern.findall((cluster.logs / f"{n}.log").read_text(errors="replace"))) for n in cluster.workers)


def test_a_postgres_restart_seen_by_dagster_and_our_tables_fails_the_run_and_a_reexecution_finishes(
        fault_cluster: Cluster, fault_instance: dg.DagsterInstance, undisturbed: Path):
    """Both ports close when the first shard starts and stay closed for OUTAGE_S, longer than
    Dagster's own retries: the run orchestrator (this process), the workers' event writes and our
    tables all lose Postgres. The run ends (no hang) as failed, naming the lost server; re-executed
    from failure it finishes with the undisturbed run's records, each once."""
    from nl2sql_assets.evaluation.history.pg_shards import PgShardStore

    config, p, backfill = "retrieval", 2, "restart-everything"
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = _launch(fault_instance, config, p, tags={"dagster/backfill": backfill})
        except Exception as exc:  # the orchestrator itself lost its storage
            outcome["error"] = exc

    before = _shard_starts(fault_cluster)
    thread = threading.Thread(target=run, daemon=True)  # a stuck run must not keep pytest alive
    thread.start()
    _wait_for_shard_start(fault_cluster, before, time.monotonic() + 120)
    fault_cluster.dagster_port.stop()
    fault_cluster.pg_port.stop()
    time.sleep(OUTAGE_S)
    fault_cluster.dagster_port.start()
    fault_cluster.pg_port.start()
    thread.join(timeout=float(os.environ.get("FAULTS_JOIN_S", "180")))
    assert not thread.is_alive(), f"the run hung after Postgres came back; worker logs under {fault_cluster.logs}"

    (run_record,) = fault_instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill}))
    # Dagster's own retries (about 6 s) do not ride over this outage: the run fails. Either a
    # step's worker lost the storage (its step fails, the run goes on and fails) or the run
    # orchestrator did (the run fails at once); both name dagster-postgres' error.
    assert run_record.status == dg.DagsterRunStatus.FAILURE, (run_record.status, outcome)
    assert "result" not in outcome or not outcome["result"].success
    messages = [str(e.dagster_event.event_specific_data.error) for e in fault_instance.all_logs(
        run_record.run_id, of_type={dg.DagsterEventType.RUN_FAILURE, dg.DagsterEventType.STEP_FAILURE})
        if e.dagster_event.event_specific_data and getattr(e.dagster_event.event_specific_data, "error", None)]
    assert any("DagsterPostgresException" in m or "PostgreSQL at" in m for m in messages), messages

    retried = _launch(fault_instance, config, p, tags={"dagster/backfill": backfill}, reexecute=run_record.run_id)
    assert retried.success, f"the re-execution failed; worker logs under {fault_cluster.logs}"
    assert retried.dagster_run.parent_run_id == run_record.run_id
    for suite in SUITES[config]:
        records = _records(fault_cluster.project, config, p, suite)
        assert records == _records(undisturbed, config, p, suite), f"{suite} {config}|{p} differs after the restart"
        keys = [(r["case_id"], r["role"]) for r in records]
        assert len(keys) == len(set(keys))
        assert PgShardStore(os.environ["NL2SQL_PG_DSN"], schema=os.environ["NL2SQL_PG_SCHEMA"]).read(
            suite, config, p) == []


def test_a_priced_run_crosses_its_cap_by_at_most_one_case_per_worker(
        fault_cluster: Cluster, fault_instance: dg.DagsterInstance, outside_ci: None):
    """The provider's price rises with every request, so each case costs more than the most
    expensive case before it, which is what the ledger reserves: every reservation falls short,
    and the run really crosses its cap. It passes it by at most one case per worker (each worker
    runs one case at a time here: max_concurrency 1), the ledger holds exactly what the records
    cost, and no reservation stays open."""
    import yaml

    from nl2sql_assets.defs.evals import BUDGET_TAG
    from nl2sql_assets.engine.events import EventBus
    from nl2sql_assets.evaluation.history.pg_ledger import PgSpendLedger
    from nl2sql_assets.evaluation.running.flaky_llm import FlakyLLMServer
    from nl2sql_assets.evaluation.suites import load_suite

    class RisingPrices(FlakyLLMServer):
        def respond(self, raw: bytes, run_id: str | None) -> tuple[int, dict[str, Any]]:
            status, reply = super().respond(raw, run_id)
            if status == 200 and "usage" in reply:  # the n-th request is billed n times its tokens
                reply["usage"] = {k: v * self.received for k, v in reply["usage"].items()}
            return status, reply

    project = fault_cluster.project
    settings = yaml.safe_load((project / "nl2sql.yaml").read_text(encoding="utf-8"))
    settings.setdefault("engine", {})["max_concurrency"] = 1
    (project / "nl2sql.yaml").write_text(yaml.safe_dump(settings, sort_keys=False), encoding="utf-8")
    cases = load_suite(project / "suites" / "chinook.yaml").cases
    backfill, cap, workers = "rising-prices", 0.50, 2
    with RisingPrices(cases, EventBus()) as server:
        (project / "configs").mkdir(exist_ok=True)
        (project / "configs" / "priced.yaml").write_text(yaml.safe_dump({
            "default": {"model": "openai/fake-provider", "api_base": server.base_url, "api_key": "x",
                        "max_retries": 0, "timeout_s": 20},
            "prices": {"fake-provider": {"input": 5.0, "output": 20.0, "source": "test"}}}))
        register_configs(fault_instance, ["priced"])
        result = _launch(fault_instance, "priced", 1, tags={"dagster/backfill": backfill, BUDGET_TAG: str(cap)})
    assert result.success, f"the priced partition failed; worker logs under {fault_cluster.logs}"

    records, meta = Warehouse.for_project(project).read_pass("chinook", "priced", 1)
    assert meta is not None and meta["request"]["mode"] == "full"
    costs = [r.cost_usd + (r.generated.cost_usd if r.generated else 0.0) for r in records if r.cost_usd or r.generated]
    totals = PgSpendLedger(os.environ["NL2SQL_PG_DSN"], backfill, schema=os.environ["NL2SQL_PG_SCHEMA"]).totals()
    spent, most = sum(costs), max(costs)
    print(f"cap {cap} spent {spent:.4f} max case {most:.4f} workers {workers} cases {len(costs)}")
    assert totals["spent"] == pytest.approx(spent)  # the ledger holds exactly what the records cost
    assert totals["open"] == 0  # every reservation settled
    assert spent > cap, f"the run stayed under its cap ({spent:.4f} of {cap}): no overshoot to observe"
    assert spent <= cap + workers * most, f"spent {spent:.4f}: more than one case per worker past the cap {cap}"
    assert any(m.metadata["stopped"].value == "max_cost" for m in _materializations(result).values())
