"""Benchmark of the cluster profile: case runs per second with 1 and 2 Celery workers, and what a
Dagster step launch costs against the shard size (so the shard size default comes from a figure).

A synthetic suite repeats the Chinook suite's answer cases (new ids; the clarify cases left out,
so every case is 3 case runs, one per role) up to --case-runs case runs, run in mode plans on the
gold LLM server: every case run makes real engine calls over HTTP and real SQLite queries. Each
(shard size, workers) combination materialises one case_runs partition on fresh workers, with
Dagster's storage in Postgres and the steps on Celery over Redis (the cluster profile).

Printed per combination: wall, case runs/s (total and per worker), CPU seconds (workers and the
orchestrator, this process), the workers' peak RSS (overall, and per step from a 0.1 s RSS sampler
matched to the steps' start and end: the shard steps' highest, the merge step's before/peak/after),
the load average, and the run split into its
phases from Dagster's event log: the split step, the shard phase, the merge step. A shard step's
overhead is the worker time per step not spent on case runs, ``(workers x shard phase - case-run
seconds) / shards``: the Celery round trip, the orchestrator's poll, the step's start in the
worker (resources, project open) and its Postgres write. A fit over every shard step gives
``step seconds = fixed + per case run x case runs``, and one over the combinations gives the workers'
CPU per step beyond its case runs (CPU seconds move less than wall time on a shared machine).

Needs Postgres (127.0.0.1:5432, trust) and Redis (127.0.0.1:6379); uses a fresh database and
Redis db 14 (or NL2SQL_BENCH_REDIS), both cleaned up. Preparing a big synthetic project (the suite, its regenerated rows)
takes minutes: ``--workdir DIR --prepare-only`` does it once, later runs with ``--workdir DIR``
reuse it. Usage:
    python scripts/bench_cluster.py --case-runs 50000 --shard-sizes 100,500,2000 --workers 1,2
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: Redis db 14 unless NL2SQL_BENCH_REDIS names another (two benchmarks at once each take their own).
REDIS_URL = os.environ.get("NL2SQL_BENCH_REDIS", "redis://127.0.0.1:6379/14")
ROLES_PER_CASE = 3


@dataclass
class Combination:
    """What one (shard size, workers) run measured."""

    workers: int
    shard_size: int
    wall: float
    case_runs: int = 0
    shards: int = 0
    split_s: float = 0.0
    shard_phase_s: float = 0.0
    merge_s: float = 0.0
    run_seconds: float = 0.0  # the case runs themselves, summed over shard steps
    in_step_s: float = 0.0  # shard steps' own time (STEP_START -> STEP_SUCCESS), summed
    worker_cpu_s: float = 0.0
    orchestrator_cpu_s: float = 0.0
    worker_rss_mib: float = 0.0
    merge_rss_mib: tuple[float, float, float] = (0.0, 0.0, 0.0)  # the merge step's RSS: before, peak, after
    shard_rss_mib: float = 0.0  # the highest RSS sampled during any shard step
    load: tuple[float, float] = (0.0, 0.0)
    steps: list[tuple[int, float]] = field(default_factory=list)  # (case runs, step seconds)

    @property
    def overhead_per_step(self) -> float:
        return (self.workers * self.shard_phase_s - self.run_seconds) / max(self.shards, 1)

    @property
    def launch_per_step(self) -> float:
        """Per step, the part outside the step's own time: queue, Celery round trip, poll."""
        return (self.workers * self.shard_phase_s - self.in_step_s) / max(self.shards, 1)


def synthetic_project(root: Path, chinook: Path, case_runs: int) -> tuple[Path, int]:
    from nl2sql_assets.demo import init_demo
    from nl2sql_assets.evaluation.suites import load_suite
    from nl2sql_assets.evaluation.suites.model import EvalSuite
    from nl2sql_assets.evaluation.suites.writer import write_suite

    project = init_demo(root / "demo", chinook=chinook).root
    base = load_suite(project / "suites" / "chinook.yaml")
    answer = [c for c in base.cases if c.status == "approved" and c.kind == "answer"
              and len(c.outcome) == ROLES_PER_CASE and "clarify" not in c.outcome.values()]
    n_cases = max(1, math.ceil(case_runs / ROLES_PER_CASE))
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
            [sys.executable, "-m", "celery", "-A", "nl2sql_assets.defs.celery_worker", "worker", "-Q",
             env["NL2SQL_CELERY_QUEUE"], "-P", "solo", "-c", "1", "-n", f"{name}@%h", "--without-gossip",
             "--without-mingle", "--without-heartbeat", "-l", "INFO"],
            env={**env, "NL2SQL_WORKER": name}, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True))
    for i, proc in enumerate(procs):
        deadline = time.monotonic() + 120
        while "ready." not in (logs / f"w{i + 1}.log").read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                stop_workers(procs)  # never leave a worker behind
                raise SystemExit(f"worker w{i + 1} not ready: {(logs / f'w{i + 1}.log').read_text()[-2000:]}")
            time.sleep(0.2)
    return procs


def worker_usage(pid: int) -> tuple[float, float]:
    """(CPU seconds including waited children, peak RSS MiB) of a live process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = sum(int(fields[n]) for n in (11, 12, 13, 14)) / ticks  # utime stime cutime cstime
    hwm = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmHWM"))
    return cpu, int(hwm.split()[1]) / 1024


class RssSampler:
    """Every worker's RSS every 0.1 s (``(time, MiB)`` per pid), so each step's peak can be read
    off against its start and end in Dagster's event log (a worker runs one step at a time)."""

    def __init__(self, pids: list[int], every_s: float = 0.1) -> None:
        self.samples: dict[int, list[tuple[float, float]]] = {pid: [] for pid in pids}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every_s,), daemon=True)
        self._thread.start()

    def _run(self, every_s: float) -> None:
        while not self._stop.is_set():
            for pid, out in self.samples.items():
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                rss = next(line for line in status.splitlines() if line.startswith("VmRSS"))
                out.append((time.time(), int(rss.split()[1]) / 1024))
            self._stop.wait(every_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def peak(self, start: float, end: float) -> float:
        """The highest RSS of any worker sampled in [start, end]."""
        return max((r for s in self.samples.values() for t, r in s if start <= t <= end), default=0.0)

    def at(self, when: float) -> float:
        """The highest RSS of any worker in the last sample before ``when``."""
        last = [next((r for t, r in reversed(s) if t <= when), 0.0) for s in self.samples.values()]
        return max(last, default=0.0)


def stop_workers(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(5)


def phases(instance: Any, run_id: str, combo: Combination, rss: RssSampler | None = None) -> None:
    """Fill the combination's phases and shard steps from the run's event log."""
    start: dict[str, float] = {}
    end: dict[str, float] = {}
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None or not event.step_key:
            continue
        if event.event_type_value == "STEP_START":
            start[event.step_key] = entry.timestamp
        elif event.event_type_value == "STEP_SUCCESS":
            end[event.step_key] = entry.timestamp
        elif event.event_type_value == "STEP_OUTPUT" and "run_shard" in event.step_key:
            md = event.event_specific_data.metadata
            combo.case_runs += md["records"].value
            combo.run_seconds += md["run_seconds"].value
            combo.steps.append((md["records"].value, md["seconds"].value))
    split = next(k for k in start if "split_cases" in k)
    merge = next(k for k in start if "merge_shards" in k)
    shards = [k for k in start if "run_shard" in k]
    combo.shards = len(shards)
    combo.split_s = end[split] - start[split]
    combo.merge_s = end[merge] - start[merge]
    combo.shard_phase_s = start[merge] - end[split]
    combo.in_step_s = sum(end[k] - start[k] for k in shards)
    if rss is not None:
        combo.merge_rss_mib = (rss.at(start[merge]), rss.peak(start[merge], end[merge]), rss.at(end[merge] + 0.5))
        combo.shard_rss_mib = max(rss.peak(start[k], end[k]) for k in shards)


def prepare(workdir: Path, chinook: Path, case_runs: int, db: str) -> tuple[Path, int]:
    """The synthetic project in ``workdir``, made (with its regenerated rows) unless it is there."""
    marker = workdir / "cases.txt"
    if marker.exists() and (workdir / "demo" / "nl2sql.yaml").exists():
        n_cases = int(marker.read_text())
        if n_cases == math.ceil(case_runs / ROLES_PER_CASE):
            print(f"reusing the synthetic project in {workdir} ({n_cases} cases)", flush=True)
            return workdir / "demo", n_cases
    shutil.rmtree(workdir / "demo", ignore_errors=True)
    started = time.perf_counter()
    project, n_cases = synthetic_project(workdir, chinook, case_runs)
    import dagster as dg

    from nl2sql_assets.defs.factory import build_defs

    with dg.instance_for_test() as instance:  # the datasets' files are what the case runs need
        result = build_defs(project / "nl2sql.yaml").resolve_job_def("datasets_job").execute_in_process(
            instance=instance)
        assert result.success
    marker.write_text(str(n_cases))
    print(f"prepared {n_cases} cases in {workdir} in {time.perf_counter() - started:.1f} s", flush=True)
    return project, n_cases


def run_combination(repo: Any, instance: Any, env: dict[str, str], workers: int, shard_size: int,
                    logs: Path) -> Combination:
    import dagster as dg

    os.environ.update(env)
    load_before = os.getloadavg()[0]
    procs = start_workers(env, workers, logs)
    rss = RssSampler([p.pid for p in procs])
    try:
        cpu0 = time.process_time()
        started = time.perf_counter()
        result = dg.execute_job(repo.get_reconstructable_job("case_runs_job"), instance, tags={
            "dagster/partition": "plans|1", "dagster/partition/config": "plans", "dagster/partition/pass": "1"})
        wall = time.perf_counter() - started
        orchestrator = time.process_time() - cpu0
        usage = [worker_usage(p.pid) for p in procs]
        time.sleep(0.6)  # the sample after the merge step's end
    finally:
        rss.stop()
        stop_workers(procs)
    assert result.success, f"run failed (logs: {logs})"
    combo = Combination(workers=workers, shard_size=shard_size, wall=wall, orchestrator_cpu_s=orchestrator,
                        worker_cpu_s=sum(c for c, _ in usage), worker_rss_mib=max(r for _, r in usage),
                        load=(load_before, os.getloadavg()[0]))
    phases(instance, result.run_id, combo, rss)
    return combo


def report(c: Combination) -> None:
    steps = [s for _, s in c.steps]
    print(f"workers={c.workers} shard={c.shard_size} cases ({c.shard_size * ROLES_PER_CASE} case runs): "
          f"{c.shards} shards, {c.case_runs} case runs, wall {c.wall:.1f} s, {c.case_runs / c.wall:.1f} case runs/s "
          f"({c.case_runs / c.wall / c.workers:.1f} per worker); split {c.split_s:.1f} s, shards {c.shard_phase_s:.1f} s, "
          f"merge {c.merge_s:.1f} s; overhead per shard step {c.overhead_per_step:.2f} s "
          f"(outside the step {c.launch_per_step:.2f} s); a case run {1000 * c.run_seconds / max(c.case_runs, 1):.2f} "
          f"ms in steps; shard step s min/median/max {min(steps):.2f}/{statistics.median(steps):.2f}/"
          f"{max(steps):.2f}; CPU workers {c.worker_cpu_s:.1f} s + orchestrator {c.orchestrator_cpu_s:.1f} s; "
          f"worker peak RSS {c.worker_rss_mib:.0f} MiB (shard steps' peak {c.shard_rss_mib:.0f} MiB; merge step "
          f"{c.merge_rss_mib[0]:.0f} -> {c.merge_rss_mib[1]:.0f} -> {c.merge_rss_mib[2]:.0f} MiB before/peak/after); "
          f"load {c.load[0]:.2f} -> {c.load[1]:.2f}", flush=True)


def table(rows: list[Combination]) -> None:
    print("\n| workers | shard (cases) | shards | case runs | wall s | case runs/s | per worker | split s | "
          "merge s | overhead per step s | overhead share | CPU s (workers + orch.) | peak RSS MiB | "
          "shard steps' peak MiB | merge step MiB (before -> peak -> after) | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for c in rows:
        share = c.overhead_per_step * c.shards / (c.workers * c.shard_phase_s)
        print(f"| {c.workers} | {c.shard_size} | {c.shards} | {c.case_runs} | {c.wall:.1f} | "
              f"{c.case_runs / c.wall:.1f} | {c.case_runs / c.wall / c.workers:.1f} | {c.split_s:.1f} | "
              f"{c.merge_s:.1f} | {c.overhead_per_step:.2f} | {share:.0%} | "
              f"{c.worker_cpu_s:.0f} + {c.orchestrator_cpu_s:.0f} | {c.worker_rss_mib:.0f} | {c.shard_rss_mib:.0f} | "
              f"{c.merge_rss_mib[0]:.0f} -> {c.merge_rss_mib[1]:.0f} -> {c.merge_rss_mib[2]:.0f} | "
              f"{c.load[0]:.1f}-{c.load[1]:.1f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case-runs", type=int, default=50_000)
    parser.add_argument("--shard-sizes", default="100,500,2000", help="cases per shard, comma separated")
    parser.add_argument("--workers", default="1,2", help="worker counts, comma separated")
    parser.add_argument("--workdir", type=Path, help="keep (and reuse) the synthetic project here")
    parser.add_argument("--prepare-only", action="store_true", help="make the synthetic project and stop")
    args = parser.parse_args()
    # A timeout's SIGTERM unwinds like an error: the workers are stopped, the database dropped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    import psycopg2
    import redis

    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    chinook = Path(os.environ["NL2SQL_CHINOOK"])
    root = Path(tempfile.mkdtemp(prefix="bench_cluster_"))
    workdir = args.workdir.resolve() if args.workdir else root
    workdir.mkdir(parents=True, exist_ok=True)
    db = f"nl2sql_bench_{uuid.uuid4().hex[:10]}"
    if args.prepare_only:
        prepare(workdir, chinook, args.case_runs, db)
        return 0
    admin = psycopg2.connect("host=127.0.0.1 dbname=postgres user=postgres", connect_timeout=3)
    admin.autocommit = True
    admin.cursor().execute(f"CREATE DATABASE {db}")
    rows: list[Combination] = []
    try:
        project, n_cases = prepare(workdir, chinook, args.case_runs, db)
        home = root / "home"
        home.mkdir()
        shutil.copy(REPO / "deploy" / "cluster" / "dagster.yaml", home / "dagster.yaml")
        logs = root / "logs"
        logs.mkdir()
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

        from nl2sql_assets.defs.partitions import register_configs

        instance = dg.DagsterInstance.get()
        register_configs(instance, ["plans"])
        repo = ReconstructableRepository.for_module("nl2sql_assets.definitions", "defs", working_directory=str(REPO))
        print(f"synthetic suite: {n_cases} cases, {n_cases * ROLES_PER_CASE} case runs asked (plans, pass 1)",
              flush=True)
        for shard_size in [int(s) for s in args.shard_sizes.split(",")]:
            for workers in [int(w) for w in args.workers.split(",")]:
                env = {**base_env, "NL2SQL_SHARD_SIZE": str(shard_size)}
                rows.append(run_combination(repo, instance, env, workers, shard_size, logs))
                report(rows[-1])
        points = [p for c in rows for p in c.steps]
        if len({r for r, _ in points}) > 1:
            slope, intercept = statistics.linear_regression([r for r, _ in points], [s for _, s in points])
            print(f"shard step fit (inside the op): {intercept:.2f} s per step + {slope * 1000:.2f} ms per case run")
        if len({c.shards for c in rows}) > 1:
            # CPU moves less than wall on a shared machine: the workers' CPU against the number of
            # steps (the same case runs in every combination) is the CPU a step costs beyond its cases.
            slope, intercept = statistics.linear_regression([c.shards for c in rows], [c.worker_cpu_s for c in rows])
            print(f"worker CPU fit: {slope:.2f} CPU s per shard step + {1000 * intercept / rows[0].case_runs:.2f} "
                  "CPU ms per case run")
        table(rows)
    finally:
        admin.cursor().execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")
        redis.Redis.from_url(REDIS_URL).flushdb()
        shutil.rmtree(root, ignore_errors=True)
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
