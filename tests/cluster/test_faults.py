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
from tests.cluster.conftest import Cluster, open_cluster
from tests.cluster.test_celery_workers import SUITES, _launch, _materializations, _records

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

SPIKE_AFTER = 8  # requests billed at the ordinary price before the price spike
OUTAGE_S = float(
    os.environ.get("FAULTS_OUTAGE_S", "12")
)  # longer than dagster-postgres retries (5 tries, ~6 s)


@pytest.fixture(scope="module")
def fault_cluster(
    tmp_path_factory: pytest.TempPathFactory, routing_template: Path, pg_database: str
) -> Iterator[Cluster]:
    with open_cluster(
        tmp_path_factory.mktemp("faults"),
        routing_template,
        pg_database,
        schema=f"faults_{uuid.uuid4().hex[:8]}",
        dagster_through_port=True,
        # No worker is killed here, so nothing needs a step handed back after 10 s (conftest's
        # default); a priced shard running one case at a time takes longer than that on a loaded
        # machine, and Redis would hand it to the other worker while it runs: billed twice.
        env_overrides={"NL2SQL_VISIBILITY_TIMEOUT_S": "300"},
    ) as c:
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
def undisturbed(tmp_path_factory: pytest.TempPathFactory, routing_template: Path) -> Path:
    """retrieval|2 and |3 run the embedded way (in-process, no profile): the records a disturbed run must end with."""
    project = tmp_path_factory.mktemp("undisturbed") / "demo"
    shutil.copytree(routing_template, project)
    saved = os.environ.pop("NL2SQL_PROFILE", None)
    try:
        defs = build_defs(project / "nl2sql.yaml")
        with dg.instance_for_test(temp_dir=str(tmp_path_factory.mktemp("undisturbed_home"))) as instance:
            register_configs(instance, ["retrieval"])
            assert defs.resolve_job_def("datasets_job").execute_in_process(instance=instance).success
            for p in (2, 3):
                assert (
                    defs.resolve_job_def("case_runs_job")
                    .execute_in_process(
                        instance=instance,
                        partition_key=config_pass_key("retrieval", p),
                        asset_selection=[case_runs_key(s) for s in SUITES["retrieval"]],
                    )
                    .success
                )
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
    return sum(
        len(pattern.findall((cluster.logs / f"{n}.log").read_text(errors="replace"))) for n in cluster.workers
    )


def test_a_postgres_restart_seen_by_dagster_and_our_tables_ends_the_run_and_the_records_are_right(
    fault_cluster: Cluster, fault_instance: dg.DagsterInstance, undisturbed: Path
):
    """Both ports close when the first shard starts and stay closed for OUTAGE_S, longer than
    Dagster's own retries: the run orchestrator (this process), the workers' event writes and our
    tables all lose Postgres. The run ends (no hang): failed, naming the lost server, and then
    re-executed from failure, or ridden over by its shards' retries. Either way the partition ends
    with the undisturbed run's records, each once."""
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
    went = time.time()
    fault_cluster.dagster_port.stop()
    fault_cluster.pg_port.stop()
    time.sleep(OUTAGE_S)
    fault_cluster.dagster_port.start()
    fault_cluster.pg_port.start()
    back = time.time()
    thread.join(timeout=float(os.environ.get("FAULTS_JOIN_S", "180")))
    assert not thread.is_alive(), (
        f"the run hung after Postgres came back; worker logs under {fault_cluster.logs}"
    )

    (run_record,) = fault_instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill}))
    # The outage hit the run: some step's attempt failed on it (or the run orchestrator did).
    noticed = _step_failures_of(fault_instance, run_record.run_id, shards_only=False) + [
        str(e.dagster_event.event_specific_data.error)
        for e in fault_instance.all_logs(run_record.run_id, of_type=dg.DagsterEventType.RUN_FAILURE)
    ]
    # Which way it ends depends on what was talking to Postgres when it went: a shard that lost
    # our tables is retried by its retry policy and the run may ride over the outage; a worker or
    # the orchestrator that lost Dagster's storage for longer than dagster-postgres' own retries
    # (about 6 s) fails its step or the run. Either way it ended, and the records must be right.
    assert run_record.status in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE), (
        run_record.status,
        outcome,
    )
    print(f"postgres restart: the run ended {run_record.status.value}; {len(noticed)} failure(s) noticed it")
    if run_record.status == dg.DagsterRunStatus.FAILURE:
        # It failed on the outage, and says so.
        assert any("DagsterPostgresException" in m or "PostgreSQL at" in m for m in noticed), noticed
        assert "result" not in outcome or not outcome["result"].success
        # A run whose orchestrator died leaves its steps on the workers to finish, and its pool
        # slots claimed: the re-execution's shards would wait for them forever (the hang seen
        # here). The daemon frees them (deploy/cluster/dagster.yaml, free_slots_after_run_end_seconds);
        # no daemon runs here, so do what it does, once the workers are quiet.
        _wait_until_workers_quiet(fault_cluster, quiet_s=4, timeout_s=90)
        fault_instance.event_log_storage.free_concurrency_slots_for_run(run_record.run_id)
        retried = _launch(
            fault_instance, config, p, tags={"dagster/backfill": backfill}, reexecute=run_record.run_id
        )
        # Always: shards the failed run never started (so Dagster's re-execution from failure does
        # not run them, dagster-io/dagster#20925) are run by their suite's merge from the stored plan.
        recovered = _recovered(fault_instance, retried.run_id)
        print(f"postgres restart: re-executed from failure: {'success' if retried.success else 'FAILURE'}; "
              f"recovered by the merge: {recovered or 'none'}")
        assert retried.success, f"the re-execution from failure failed; worker logs under {fault_cluster.logs}"
    else:
        # Ridden over (dagster-postgres' and the shards' retries): the whole outage fell inside
        # the run, which went on after Postgres came back.
        assert outcome["result"].success
        timed = fault_instance.get_run_record_by_id(run_record.run_id)
        assert timed is not None and timed.start_time is not None and timed.end_time is not None
        assert timed.start_time < went and timed.end_time > back, (timed.start_time, went, back)
    for suite in SUITES[config]:
        records = _records(fault_cluster.project, config, p, suite)
        assert records == _records(undisturbed, config, p, suite), (
            f"{suite} {config}|{p} differs after the restart"
        )
        keys = [(r["case_id"], r["role"]) for r in records]
        assert len(keys) == len(set(keys))
        assert (
            PgShardStore(os.environ["NL2SQL_PG_DSN"], schema=os.environ["NL2SQL_PG_SCHEMA"]).read(
                suite, config, p
            )
            == []
        )


def test_a_run_that_failed_before_launching_its_shards_finishes_on_re_execution_from_failure(
    fault_cluster: Cluster, fault_instance: dg.DagsterInstance, undisturbed: Path, monkeypatch: pytest.MonkeyPatch
):
    """The gap a Postgres restart sometimes leaves, made certain: the run orchestrator (this
    process) fails the moment it would launch a suite's first shard, after the split stored its
    plan, so no shard step ever starts. Dagster's re-execution from failure then runs no shard step
    (its state of the failed run knows only steps with events; dagster-io/dagster#20925), only the
    merges, and each merge runs its suite's planned shards itself. Before that, a suite file
    edited since the split is refused by name, storing nothing; restored, the next re-execution
    from failure finishes with the undisturbed run's records."""
    import nl2sql_assets.defs.celery_steps as celery_steps
    from nl2sql_assets.evaluation.history.pg_shard_plans import PgShardPlans

    config, p, backfill = "retrieval", 3, "unlaunched-shards"
    submit = celery_steps._submit

    def no_shard_launches(app: Any, job_context: Any, step: Any, *rest: Any) -> Any:
        if "_run_shard[" in step.key:
            raise ConnectionError(f"the orchestrator died before launching {step.key}")
        return submit(app, job_context, step, *rest)

    with monkeypatch.context() as patch:
        patch.setattr(celery_steps, "_submit", no_shard_launches)
        failed = _launch(fault_instance, config, p, tags={"dagster/backfill": backfill})
    assert not failed.success
    _wait_until_workers_quiet(fault_cluster, quiet_s=3, timeout_s=90)  # a split still on a worker ends
    fault_instance.event_log_storage.free_concurrency_slots_for_run(failed.run_id)
    assert _started(fault_instance, failed.run_id) == {f"{s}__case_runs.{s}_split_cases" for s in SUITES[config]}
    plans = PgShardPlans(os.environ["NL2SQL_PG_DSN"], schema=os.environ["NL2SQL_PG_SCHEMA"])
    planned = {s: plans.require(s, config, p) for s in SUITES[config]}
    assert all(plan.planned_by == failed.run_id for plan in planned.values())
    assert len(planned["chinook"].shards) >= 2

    # The routing suite edited after its split: its merge refuses, naming the suite; chinook finishes.
    routing = fault_cluster.project / "suites" / "routing.yaml"
    text = routing.read_text(encoding="utf-8")
    routing.write_text(text + "\n# edited after the split\n", encoding="utf-8")
    try:
        edited = _launch(fault_instance, config, p, tags={"dagster/backfill": backfill}, reexecute=failed.run_id)
    finally:
        routing.write_text(text, encoding="utf-8")
    assert not edited.success
    why = _step_failures_of(fault_instance, edited.run_id, shards_only=False)
    assert len(why) == 1 and "suite routing (" in why[0] and "changed since the split step planned partition " \
        f"{config}|{p}" in why[0], why
    # Dagster ran no shard step: each merge ran its suite's planned shards itself.
    assert _started(fault_instance, edited.run_id) == {f"{s}__case_runs.{s}_merge_shards" for s in SUITES[config]}
    assert _recovered(fault_instance, edited.run_id) == {"chinook": list(range(len(planned["chinook"].shards)))}

    finished = _launch(fault_instance, config, p, tags={"dagster/backfill": backfill}, reexecute=edited.run_id)
    assert finished.success, f"the re-execution from failure failed; worker logs under {fault_cluster.logs}"
    assert _started(fault_instance, finished.run_id) == {"routing__case_runs.routing_merge_shards"}
    assert _recovered(fault_instance, finished.run_id) == {"routing": list(range(len(planned["routing"].shards)))}
    for suite in SUITES[config]:
        records = _records(fault_cluster.project, config, p, suite)
        assert records == _records(undisturbed, config, p, suite), f"{suite} {config}|{p} differs"


def _started(instance: dg.DagsterInstance, run_id: str) -> set[str]:
    """The steps of a run that started (on a worker)."""
    return {e.dagster_event.step_key for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_START)}


def _recovered(instance: dg.DagsterInstance, run_id: str) -> dict[str, list[int]]:
    """The shards each suite's merge ran itself in a run (its log line ``recovered shard(s) [..]``)."""
    found: dict[str, list[int]] = {}
    for event in instance.all_logs(run_id):
        match = re.match(r"(\w+) \w+\|\d+: recovered shard\(s\) \[([\d, ]*)\]", event.user_message or "")
        if match:
            found[match.group(1)] = [int(n) for n in match.group(2).split(",")]
    return found


def _priced_config(instance: dg.DagsterInstance, project: Path, base_url: str) -> None:
    """The LLM config ``priced``: a fake provider at ``base_url``, priced $5 / $20 per million
    tokens, no retries; registered as a partition of the instance."""
    import yaml

    (project / "configs").mkdir(exist_ok=True)
    (project / "configs" / "priced.yaml").write_text(
        yaml.safe_dump(
            {
                "default": {
                    "model": "openai/fake-provider",
                    "api_base": base_url,
                    "api_key": "x",
                    "max_retries": 0,
                    "timeout_s": 20,
                },
                "prices": {"fake-provider": {"input": 5.0, "output": 20.0, "source": "test"}},
            }
        )
    )
    register_configs(instance, ["priced"])


def test_a_priced_run_crosses_its_cap_by_at_most_one_case_per_worker(
    fault_cluster: Cluster, fault_instance: dg.DagsterInstance, outside_ci: None
):
    """The provider's price jumps 20-fold after a few cases: the cases then in flight cost far more
    than the most expensive case before them, which is what the ledger reserved (one spiked case
    alone costs more than the cap). The run stops at the cap and passes it by at most one case per
    worker (each worker runs one case at a time here: max_concurrency 1), the ledger holds exactly
    what was spent (the records and the cases the cap stopped in flight), and no reservation stays
    open."""

    from nl2sql_assets.defs.evals import BUDGET_TAG
    from nl2sql_assets.engine.events import EventBus
    from nl2sql_assets.evaluation.history.pg_ledger import PgSpendLedger
    from nl2sql_assets.evaluation.running.flaky_llm import FlakyLLMServer
    from nl2sql_assets.evaluation.suites import load_suite

    class RisingPrices(FlakyLLMServer):
        def respond(self, raw: bytes, run_id: str | None) -> tuple[int, dict[str, Any]]:
            status, reply = super().respond(raw, run_id)
            if status == 200 and "usage" in reply and self.received > SPIKE_AFTER:  # 20 times the tokens
                reply["usage"] = {k: v * 20 for k, v in reply["usage"].items()}
            return status, reply

    project = fault_cluster.project
    _one_case_per_worker(project)
    cases = load_suite(project / "suites" / "chinook.yaml").cases
    backfill, cap, workers = "rising-prices", 0.50, 2
    with RisingPrices(cases, EventBus()) as server:
        _priced_config(fault_instance, project, server.base_url)
        result = _launch(
            fault_instance, "priced", 1, tags={"dagster/backfill": backfill, BUDGET_TAG: str(cap)}
        )
    assert result.success, f"the priced partition failed; worker logs under {fault_cluster.logs}"

    records, meta = Warehouse.for_project(project).read_pass("chinook", "priced", 1)
    assert meta is not None and meta["request"]["mode"] == "full"
    costs = [
        r.cost_usd + (r.generated.cost_usd if r.generated else 0.0)
        for r in records
        if r.cost_usd or r.generated
    ]
    totals = PgSpendLedger(
        os.environ["NL2SQL_PG_DSN"], backfill, schema=os.environ["NL2SQL_PG_SCHEMA"]
    ).totals()
    recorded, most = sum(costs), max(costs)
    spent = meta["spent"]  # the records' dollars and those of the cases the cap stopped in flight
    stopped = sum(c["stopped_by_cap"] for c in meta["configs"].values())
    print(f"cap {cap} spent {spent:.4f} recorded {recorded:.4f} max case {most:.4f} workers {workers} "
          f"cases {len(costs)} stopped in flight {stopped}")
    assert totals["spent"] == pytest.approx(spent)  # the ledger holds exactly what was spent
    # Dollars beyond the records come only from cases the cap stopped in flight; a case stopped at
    # its first model call spent nothing, so a stopped case need not add any.
    assert recorded <= spent + 1e-9
    assert stopped > 0 or spent == pytest.approx(recorded)
    assert totals["open"] == 0  # every reservation settled
    # Whether the spiked calls in flight carry it past the cap depends on which worker's call goes
    # out first; the bound does not (the per-call rule's own cases are in test_cap_per_call).
    assert spent <= cap + workers * most, (
        f"spent {spent:.4f}: more than one case per worker past the cap {cap}"
    )
    assert any(m.metadata["stopped"].value == "max_cost" for m in _materializations(result).values())


def test_an_outage_in_a_priced_shard_keeps_its_spend_and_the_rerun_bills_again(
    fault_cluster: Cluster, fault_instance: dg.DagsterInstance, outside_ci: None
):
    """Our tables' Postgres goes away while a priced shard is calling the provider. The shard fails
    (nothing of it stored) and runs again, calling the provider again. The ledger shows both
    attempts: the spend the failed attempt recorded before the outage is kept, so the ledger holds
    more than the records cost and never more than the provider billed; only calls answered while
    Postgres was away are missing from it."""

    from nl2sql_assets.defs.evals import BUDGET_TAG
    from nl2sql_assets.engine.events import EventBus
    from nl2sql_assets.evaluation.history.pg_ledger import PgSpendLedger
    from nl2sql_assets.evaluation.running.flaky_llm import FlakyLLMServer
    from nl2sql_assets.evaluation.suites import load_suite

    project = fault_cluster.project
    _one_case_per_worker(project)
    cases = load_suite(project / "suites" / "chinook.yaml").cases
    backfill, cap, workers = "priced-outage", 50.0, 2
    outcome: dict[str, Any] = {}
    with FlakyLLMServer(cases, EventBus(), delay_s=0.05) as server:
        _priced_config(fault_instance, project, server.base_url)
        tags = {"dagster/backfill": backfill, BUDGET_TAG: str(cap)}

        def run() -> None:
            outcome["result"] = _launch(fault_instance, "priced", 2, tags=tags)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 120
        while server.received < 12:  # a few cases answered and settled in the ledger
            assert time.monotonic() < deadline and thread.is_alive(), (
                "the priced run never called the provider"
            )
            time.sleep(0.02)
        fault_cluster.pg_port.stop()
        time.sleep(3)
        fault_cluster.pg_port.start()
        thread.join(timeout=240)
        assert not thread.is_alive(), "the priced run did not end after Postgres came back"
        result = outcome["result"]
        failures = _step_failures_of(fault_instance, result.run_id)
        assert failures, "no shard failed: the outage missed the priced shards"
        assert all("PostgreSQL at 127.0.0.1:" in m for m in failures), failures
        if not result.success:  # the shard's own retries fell inside the outage: re-execute from failure
            result = _launch(fault_instance, "priced", 2, tags=tags, reexecute=result.run_id)
        assert result.success, f"the priced partition did not finish; worker logs under {fault_cluster.logs}"
        billed = (server.billed_prompt_tokens * 5.0 + server.billed_completion_tokens * 20.0) / 1e6

    records, _ = Warehouse.for_project(project).read_pass("chinook", "priced", 2)
    costs = [r.cost_usd + (r.generated.cost_usd if r.generated else 0.0) for r in records]
    keys = [(r.case_id, r.role) for r in records]
    assert len(keys) == len(set(keys))
    totals = PgSpendLedger(
        os.environ["NL2SQL_PG_DSN"], backfill, schema=os.environ["NL2SQL_PG_SCHEMA"]
    ).totals()
    print(
        f"records {sum(costs):.4f} ledger {totals['spent']:.4f} open {totals['open']} "
        f"reserved {totals['reserved']:.4f} billed {billed:.4f} cap {cap}"
    )
    assert totals["spent"] > sum(costs) + 1e-9  # the failed attempt's spend is kept, not lost
    assert totals["spent"] <= billed + 1e-9  # and nothing is counted that the provider did not bill
    # The cases in flight when Postgres went could not settle: their reservations stay open (one
    # per worker at most) until they count as spent (stale_after_s), and what they cost is all the
    # ledger misses of the provider's bill: at most one case per worker.
    assert totals["open"] <= workers
    assert billed - totals["spent"] <= workers * max(costs) + 1e-9
    assert totals["spent"] <= cap + workers * max(costs)


def _step_failures_of(instance: dg.DagsterInstance, run_id: str, shards_only: bool = True) -> list[str]:
    """Why each (shard) step attempt of a run failed (a failure, or one its retry policy ran again)."""
    kinds = {dg.DagsterEventType.STEP_FAILURE, dg.DagsterEventType.STEP_UP_FOR_RETRY}
    return [
        str(e.dagster_event.event_specific_data.error)
        for e in instance.all_logs(run_id, of_type=kinds)
        if not shards_only or "run_shard" in (e.dagster_event.step_key or "")
    ]


def _wait_until_workers_quiet(cluster: Cluster, quiet_s: float, timeout_s: float) -> None:
    """Until no worker has written to its log for ``quiet_s`` (the failed run's steps are done)."""
    deadline, last, since = time.monotonic() + timeout_s, None, time.monotonic()
    while time.monotonic() - since < quiet_s:
        sizes = [(cluster.logs / f"{n}.log").stat().st_size for n in cluster.workers]
        if sizes != last:
            last, since = sizes, time.monotonic()
        assert time.monotonic() < deadline, f"the workers were still busy after {timeout_s} s"
        time.sleep(0.5)


def _one_case_per_worker(project: Path) -> None:
    """Each worker runs one case at a time (settings.max_concurrency 1), so "one case per worker"
    is the bound on what is in flight."""
    import yaml

    settings = yaml.safe_load((project / "nl2sql.yaml").read_text(encoding="utf-8"))
    settings.setdefault("settings", {})["max_concurrency"] = 1
    (project / "nl2sql.yaml").write_text(yaml.safe_dump(settings, sort_keys=False), encoding="utf-8")
