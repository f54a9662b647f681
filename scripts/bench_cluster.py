"""Benchmark of the cluster profile: case runs per second with 1 and 2 Celery workers, and what a
Dagster step launch costs against the shard size (so the shard size default comes from a figure).

A synthetic suite repeats the Chinook suite's answer cases (new ids) up to --case-runs case runs
(cases x 3 roles), run in mode plans (the gold LLM server: every case run makes real engine
calls over HTTP and real SQLite queries). Each (workers, shard size) combination materialises
one case_runs partition on fresh workers; the script prints wall time, case runs per second
(total and per worker) and, from each shard step's own time, a fit ``step seconds = launch +
per_case_run x case runs``: ``launch`` is the fixed cost of one step (job load, project open).

Needs Postgres (127.0.0.1:5432, trust) and Redis (127.0.0.1:6379); uses a fresh database and
Redis db 14, both cleaned up. Usage:
    python scripts/bench_cluster.py --case-runs 50000 --shard-sizes 100,500,2000 --workers 1,2
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REDIS_URL = "redis://127.0.0.1:6379/14"


def synthetic_project(root: Path, chinook: Path, case_runs: int) -> tuple[Path, int]:
    from nl2sql_assets.demo import init_demo
    from nl2sql_assets.evaluation.suites import load_suite
    from nl2sql_assets.evaluation.suites.model import EvalSuite
    from nl2sql_assets.evaluation.suites.writer import write_suite

    project = init_demo(root / "demo", chinook=chinook).root
    base = load_suite(project / "suites" / "chinook.yaml")
    answer = [c for c in base.cases if c.status == "approved" and c.kind == "answer"]
    per_case = len(answer[0].outcome)
    n_cases = max(1, case_runs // per_case)
    cases = [answer[i % len(answer)].model_copy(update={"id": f"{answer[i % len(answer)].id}_s{i:06d}"})
             for i in range(n_cases)]
    write_suite(EvalSuite(cases=cases), project / "suites" / "synthetic.yaml")
    evals = project / "evals.yaml"
    evals.write_text(evals.read_text().replace("- suites/chinook.yaml", "- suites/synthetic.yaml"))
    return project, n_cases


def start_workers(env: dict[str, str], n: int, logs: Path) -> list[subprocess.Popen]:
    procs = []
    for i in range(n):
        name = f"w{i + 1}"
        log = (logs / f"{name}.log").open("w")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "nl2sql_assets.cluster.worker", "worker", "-Q",
             env["NL2SQL_CELERY_QUEUE"], "-P", "solo", "-c", "1", "-n", f"{name}@%h", "--without-gossip",
             "--without-mingle", "--without-heartbeat", "-l", "INFO"],
            env={**env, "NL2SQL_WORKER": name}, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True))
    for i in range(n):
        deadline = time.monotonic() + 120
        while "ready." not in (logs / f"w{i + 1}.log").read_text(errors="replace"):
            if time.monotonic() > deadline:
                raise SystemExit(f"worker w{i + 1} not ready")
            time.sleep(0.2)
    return procs


def stop_workers(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case-runs", type=int, default=50_000)
    parser.add_argument("--shard-sizes", default="100,500,2000", help="cases per shard, comma separated")
    parser.add_argument("--workers", default="1,2")
    args = parser.parse_args()
    import psycopg2
    import redis

    chinook = Path(os.environ["NL2SQL_CHINOOK"])
    root = Path(tempfile.mkdtemp(prefix="bench_cluster_"))
    db = f"nl2sql_bench_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect("host=127.0.0.1 dbname=postgres user=postgres", connect_timeout=3)
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {db}")
    rows = []
    try:
        project, n_cases = synthetic_project(root, chinook, args.case_runs)
        home = root / "home"
        home.mkdir()
        shutil.copy(REPO / "deploy" / "cluster" / "dagster.yaml", home / "dagster.yaml")
        (root / "logs").mkdir()
        base_env = {**os.environ, "NL2SQL_PROFILE": "cluster",
                    "NL2SQL_PG_DSN": f"host=127.0.0.1 dbname={db} user=postgres",
                    "NL2SQL_DAGSTER_PG_URL": f"postgresql+psycopg2://postgres@127.0.0.1:5432/{db}",
                    "NL2SQL_CELERY_BROKER": REDIS_URL, "NL2SQL_CELERY_BACKEND": REDIS_URL,
                    "NL2SQL_CELERY_QUEUE": f"bench_{uuid.uuid4().hex[:6]}",
                    "NL2SQL_PROJECT": str(project / "nl2sql.yaml"), "DAGSTER_HOME": str(home),
                    "PYTHONPATH": str(REPO)}
        os.environ.update(base_env)
        import dagster as dg
        from dagster._core.definitions.reconstruct import ReconstructableRepository

        from nl2sql_assets.defs.factory import build_defs
        from nl2sql_assets.defs.partitions import register_configs

        instance = dg.DagsterInstance.get()
        register_configs(instance, ["plans"])
        assert build_defs(project / "nl2sql.yaml").resolve_job_def("datasets_job").execute_in_process(
            instance=instance).success
        repo = ReconstructableRepository.for_module("nl2sql_assets.definitions", "defs", working_directory=str(REPO))
        print(f"synthetic suite: {n_cases} cases, {args.case_runs} case runs asked (plans, pass 1)", flush=True)
        for shard_size in [int(s) for s in args.shard_sizes.split(",")]:
            for workers in [int(w) for w in args.workers.split(",")]:
                env = {**base_env, "NL2SQL_SHARD_SIZE": str(shard_size)}
                os.environ.update(env)
                procs = start_workers(env, workers, root / "logs")
                try:
                    started = time.perf_counter()
                    result = dg.execute_job(repo.get_reconstructable_job("case_runs_job"), instance, tags={
                        "dagster/partition": "plans|1", "dagster/partition/config": "plans",
                        "dagster/partition/pass": "1"})
                    wall = time.perf_counter() - started
                finally:
                    stop_workers(procs)
                assert result.success, f"run failed (logs: {root / 'logs'})"
                steps = []
                for e in result.all_events:
                    if e.event_type_value == "STEP_OUTPUT" and "run_shard" in (e.step_key or ""):
                        md = e.event_specific_data.metadata
                        steps.append((md["records"].value, md["seconds"].value))
                records = sum(r for r, _ in steps)
                rows.append((workers, shard_size, len(steps), records, wall, steps))
                print(f"workers={workers} shard={shard_size}: {len(steps)} shards, {records} case runs, "
                      f"{wall:.1f} s, {records / wall:.1f} case runs/s ({records / wall / workers:.1f} per worker); "
                      f"shard step s min/median/max {min(s for _, s in steps):.2f}/"
                      f"{statistics.median(s for _, s in steps):.2f}/{max(s for _, s in steps):.2f}", flush=True)
        points = [(r, s) for row in rows for r, s in row[5]]
        if len({r for r, _ in points}) > 1:
            xs, ys = [r for r, _ in points], [s for _, s in points]
            slope, intercept = statistics.linear_regression(xs, ys)
            print(f"shard step fit: {intercept:.2f} s per step + {slope * 1000:.2f} ms per case run "
                  f"(inside the step; the Celery round trip and the orchestrator's 1 s poll add to it)")
        print("\n| workers | shard size | shards | case runs | wall s | case runs/s | per worker |")
        print("|---|---|---|---|---|---|---|")
        for workers, shard_size, shards, records, wall, _ in rows:
            print(f"| {workers} | {shard_size} | {shards} | {records} | {wall:.1f} | {records / wall:.1f} | "
                  f"{records / wall / workers:.1f} |")
    finally:
        admin.cursor().execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        client = redis.Redis.from_url(REDIS_URL)
        client.flushdb()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
