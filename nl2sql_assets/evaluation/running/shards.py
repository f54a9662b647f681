"""Shards: one run's case runs cut into parts that run apart, and merged back in the order of a
single run. One model serves both places a run is cut:

- **worker processes** (``--workers``, ``evals.run(workers=N)``): the running process keeps
  shard 0 and starts one process per other shard; each builds its own project from the same
  config (its own engine, gold server, read-only connections), runs the same request with
  ``shard=(index, count)``, and sends each record back the moment it is finished. The running
  process counts them as its own (the record, the event, the callback) at their place in its
  job order, so the records are those of a one-process run apart from timings. Cases are dealt
  round-robin (``deal``), so the shards advance through the run's order side by side.
- **cluster steps** (``nl2sql_assets.defs.cluster``, a Dagster step per shard on a Celery
  worker; this module knows nothing of either): ``plan_shards`` cuts a partition into contiguous
  chunks of ``shard_size`` cases, each run as an ordinary run of those case ids
  (``shard_request``, ``keep_own``), and ``merge_shards`` joins them in shard order (the cluster's
  merge step streams the records and merges only the metas, ``merge_metas``).

A shard is always a list of case ids: every role and every pass of a case run in the same
shard. Only modes that spend nothing shard over processes (``Mode.shardable``): a dollar cap
across processes needs one spend ledger, which mode full's own loop keeps (the cluster's steps
share one in Postgres). Small runs stay in one process.

How a worker starts (``start_method``): where the running process is one thread on Linux (the
CLI, before its run starts any), it is forked: the child has every module imported already, and
builds its engine, connections and gold server while the running process builds its own, so a
second core pays off from about fifty case runs (``MIN_JOBS_PER_FORKED_SHARD``). Anywhere
else (threads running: Dagster, a test runner, a library caller's process) it is spawned, which
re-imports everything (about half a second) before it can start: only worth it from a few
hundred case runs on (``MIN_JOBS_PER_SHARD``). The worker never uses what it inherited: it builds
its project from the plain config, exactly as a spawned one does.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import queue as queue_mod
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from nl2sql_assets.config import StrictModel
from nl2sql_assets.redact import get_logger

if TYPE_CHECKING:
    from nl2sql_assets.config import ProjectConfig
    from nl2sql_assets.evaluation.running.modes import CaseJob, Mode
    from nl2sql_assets.evaluation.running.request import RunRequest
    from nl2sql_assets.evaluation.running.results import CaseRuns, RunMeta
    from nl2sql_assets.evaluation.running.selection import RoleRun

#: What a worker process runs: ``(config, shard_request, queue)``, sending each record back on
#: the queue (``runner.run_shard_worker``); a top-level function, so a spawned process finds it.
ShardWorker = Callable[["ProjectConfig", "RunRequest", Any], None]

log = get_logger(__name__)

#: Below this many jobs per shard a run stays in one process (workers spawned).
MIN_JOBS_PER_SHARD = 300
#: The same where workers are forked (``start_method``): no imports to pay again.
MIN_JOBS_PER_FORKED_SHARD = 50
#: The keys of a run's ``settings`` that say how its case runs were made (how many processes, how
#: the workers started), not what was asked: their latencies depend on them, their verdicts do not.
LAYOUT_SETTINGS = ("processes", "worker_start")
#: The most worker processes a run starts by default (the machines this runs on have 2 cores).
DEFAULT_MAX_WORKERS = 2


class ShardError(RuntimeError):
    """A worker process failed; the message holds its error."""


class Shard(StrictModel):
    """The cases one part of a run runs: ``index`` of ``count`` shards."""

    index: int
    count: int
    case_ids: list[str]

    @property
    def key(self) -> str:
        """A step-key-safe name (Dagster mapping keys allow letters, digits and underscores)."""
        return f"shard_{self.index:04d}"


# ---------------------------------------------------------------- planning


def runnable_case_ids(runs: Sequence[RoleRun]) -> list[str]:
    """The distinct case ids of a run's role runs, in the run's order."""
    return list(dict.fromkeys(rr.case.id for rr in runs))


def cut(case_ids: Sequence[str], shard_size: int, others: Sequence[str] = ()) -> list[Shard]:
    """Contiguous chunks of ``shard_size`` cases (the last may be smaller); ``others`` (cases the
    mode leaves out, so that the merged run counts them as a single run does) ride with shard 0."""
    from nl2sql_assets.evaluation.running.selection import SelectionError

    if shard_size < 1:
        raise SelectionError(f"shard size must be at least 1, got {shard_size}")
    chunks = [list(case_ids[n:n + shard_size]) for n in range(0, len(case_ids), shard_size)] or [[]]
    taken = set(case_ids)
    chunks[0] = chunks[0] + [i for i in others if i not in taken]
    return [Shard(index=n, count=len(chunks), case_ids=ids) for n, ids in enumerate(chunks)]


def deal(case_ids: Sequence[str], count: int) -> list[Shard]:
    """``count`` shards, the cases dealt round-robin (case ``i`` to shard ``i % count``), so every
    shard has a share of each part of the run and the shards' records come back near run order."""
    return [Shard(index=n, count=count, case_ids=list(case_ids[n::count])) for n in range(count)]


def jobs_of(shard: Shard, jobs: Sequence[CaseJob]) -> list[CaseJob]:
    """The jobs (every role, pass and config) of the shard's cases."""
    own = set(shard.case_ids)
    return [j for j in jobs if j.rr.case.id in own]


def plan_shards(request: RunRequest, config: ProjectConfig, shard_size: int) -> list[Shard]:
    """The shards of ``request``'s cases, ``shard_size`` runnable cases each (the last may be smaller)."""
    from nl2sql_assets.evaluation.running.modes import get_mode
    from nl2sql_assets.evaluation.running.selection import (
        SelectionError,
        load_run_suites,
        role_runs,
        select_cases,
    )

    if shard_size < 1:
        raise SelectionError(f"shard size must be at least 1, got {shard_size}")
    suites = [(name, suite) for name, _, suite in load_run_suites(config, request.suites)]
    selected = select_cases(suites, request.cases)
    mode = get_mode(request.mode)
    # The runner's own steps: role runs, the kinds the mode runs, then the mode's selection (e.g.
    # retrieval keeps only cases some allowed role can answer), so no shard is left empty.
    runs, _ = role_runs(selected, request.roles, clarify=request.asks_clarify(config))
    kept = [rr for rr in runs if rr.case.kind in mode.kinds]
    runnable = runnable_case_ids(mode.select(kept) if kept else [])
    return cut(runnable, shard_size, others=runnable_case_ids(selected))


def shard_request(request: RunRequest, shard: Shard) -> RunRequest:
    """The request that runs exactly one shard's cases (as an ordinary run)."""
    return request.model_copy(update={"cases": list(shard.case_ids)})


def keep_own(runs: CaseRuns, shard: Shard) -> CaseRuns:
    """Only the shard's own cases (a case id that is also another case's tag selects both)."""
    own = set(shard.case_ids)
    return runs.model_copy(update={"records": [r for r in runs.records if r.case_id in own]})


def merge_shards(request: RunRequest, shards: Sequence[CaseRuns]) -> CaseRuns:
    """The single run that contiguous shards (``cut``) make together: records in shard order,
    counts summed, the request as the partition gave it, and the run stamp from the first start
    to the last end (``merge_metas``). The cluster's merge step streams the records instead
    (``history.pg_merge``) and merges only the metas."""
    from nl2sql_assets.evaluation.running.results import CaseRuns
    from nl2sql_assets.evaluation.running.selection import SelectionError

    if not shards:
        raise SelectionError("nothing to merge: no shard ran")
    meta = merge_metas(request, [s.meta for s in shards])
    return CaseRuns(records=[r for s in shards for r in s.records], meta=meta)


def merge_metas(request: RunRequest, metas: Sequence[RunMeta]) -> RunMeta:
    """The RunMeta of the run that contiguous shards make together, from the shards' RunMetas
    alone (in shard order): counts summed, the request as the partition gave it, the run stamp
    from the first start to the last end. No record is needed, so a merge holds none."""
    from nl2sql_assets.evaluation.running.results import RunMeta, summed_counts
    from nl2sql_assets.evaluation.running.selection import SelectionError
    from nl2sql_assets.llm.calls import combine_sources

    if not metas:
        raise SelectionError("nothing to merge: no shard ran")
    first = metas[0]
    configs = {}
    for name, c in first.configs.items():
        parts = [m.configs[name] for m in metas if name in m.configs]
        configs[name] = c.model_copy(update={
            "planned_cases": sum(p.planned_cases for p in parts),
            "completed_cases": sum(p.completed_cases for p in parts),
            "unknown_cost_calls": sum(p.unknown_cost_calls for p in parts),
            "estimated_calls": sum(p.estimated_calls for p in parts),
            "stopped_by_cap": sum(p.stopped_by_cap for p in parts),
            "token_source": combine_sources(p.token_source for p in parts),
            "env_errors": summed_counts(p.env_errors for p in parts),
        })
    databases = {}
    for m in metas:
        for d in m.databases:
            databases.setdefault(d.datasource_id, d)
    left_out: dict[str, int] = {}
    for m in metas:
        for kind, n in m.left_out.items():
            left_out[kind] = left_out.get(kind, 0) + n
    stamp = first.run_stamp.model_copy(update={
        "started_at": min(m.run_stamp.started_at for m in metas),
        "finished_at": max(m.run_stamp.finished_at for m in metas),
    })
    stopped = next((m.stopped for m in metas if m.stopped), None)
    return RunMeta.model_validate({
        **first.model_dump(),
        "request": request,
        "roles": sorted({r for m in metas for r in m.roles}),
        "spent": sum(m.spent for m in metas),
        "stopped": stopped,
        # An outage in any shard makes the whole partition's run incomplete, counted over all shards.
        "incomplete": any(m.incomplete for m in metas),
        "env_errors": summed_counts(m.env_errors for m in metas),
        "breaker": next((m.breaker for m in metas if m.breaker), None),
        "skipped": sum(m.skipped for m in metas),
        "left_out": left_out,
        "databases": list(databases.values()),
        "configs": configs,
        "run_stamp": stamp,
    })


# ---------------------------------------------------------------- how many worker processes


def default_workers() -> int:
    return max(1, min(DEFAULT_MAX_WORKERS, os.cpu_count() or 1))


def start_method() -> str:
    """``fork`` where this process may be forked (``forking.fork_is_safe``: Linux, one thread,
    native ones counted), else ``spawn``."""
    from nl2sql_assets.forking import fork_is_safe

    return "fork" if fork_is_safe() else "spawn"


def shard_count(request: RunRequest, mode: Mode, jobs: int, *, custom_scorers: bool, budget: Any,
                min_jobs: int = MIN_JOBS_PER_SHARD) -> int:
    """How many shards a run takes: 1 for a shard itself, a mode that spends, a shared budget,
    scorers written in code (a worker cannot rebuild them), or fewer than ``min_jobs`` jobs a
    shard by default."""
    if request.shard is not None or not mode.shardable or custom_scorers or budget is not None:
        return 1
    wanted = request.workers if request.workers is not None else default_workers()
    if request.workers is None:  # the default: only where every shard has enough to do
        wanted = min(wanted, max(1, jobs // min_jobs))
    return max(1, min(wanted, jobs))


def portable(scorers: dict[str, Any]) -> bool:
    """Whether a worker process builds the same scorers by name: built-ins and installed plugins
    (scorers added in code live in this process only)."""
    from nl2sql_assets.evaluation.running.scorers import BUILTINS, _entry_point_classes

    return all(BUILTINS.get(name) is type(s) or _entry_point_classes().get(name) is type(s)
               for name, s in scorers.items())


# ---------------------------------------------------------------- the running side


class Workers:
    """The worker processes of one run, and the records they send."""

    def __init__(self, config: ProjectConfig, request: RunRequest, count: int, target: ShardWorker,
                 method: str = "spawn") -> None:
        ctx = multiprocessing.get_context(method)  # fork only a one-thread process (``start_method``)
        self.method = method
        self.queue = ctx.Queue()
        self.procs = []
        for index in range(1, count):
            shard_request = request.model_copy(update={"shard": (index, count)})
            proc = ctx.Process(target=target, args=(config, shard_request, self.queue), daemon=True,
                               name=f"nl2sql-shard-{index}-of-{count}")
            proc.start()
            self.procs.append(proc)
        self.unknown_cost_calls: dict[str, int] = {}

    async def collect(self, count_record: Any, jobs: Sequence[CaseJob]) -> None:
        """Count each record as it comes (``count_record(job, record, cost)``) until every worker is done."""
        from nl2sql_assets.evaluation.running.results import CaseRecord

        by_key = {(j.config, j.rr.suite, j.rr.case.id, j.rr.role, j.pass_index): j for j in jobs}
        waiting = len(self.procs)
        pending: list[tuple[str, Any, Any]] = []
        while waiting:
            if not pending:
                try:  # wait for a message off the event loop, then take what else is there without waiting
                    pending.append(await asyncio.to_thread(self.queue.get, True, 1.0))
                except queue_mod.Empty:
                    dead = [p for p in self.procs if not p.is_alive() and p.exitcode not in (0, None)]
                    if dead:
                        raise ShardError(f"worker {dead[0].name} died (exit code {dead[0].exitcode})") from None
                    continue
                with contextlib.suppress(queue_mod.Empty):
                    while len(pending) < 256:
                        pending.append(self.queue.get_nowait())
                pending.reverse()
            kind, payload, extra = pending.pop()
            if kind == "record":
                record = CaseRecord.model_validate_json(payload)
                job = by_key[(record.config, record.suite, record.case_id, record.role, record.pass_index)]
                count_record(job, record, extra)
            elif kind == "done":
                for name, n in payload.items():
                    self.unknown_cost_calls[name] = self.unknown_cost_calls.get(name, 0) + n
                waiting -= 1
            elif kind == "interrupted":  # Ctrl-C reached a worker first: the whole run was interrupted
                raise KeyboardInterrupt
            else:
                raise ShardError(f"a worker process failed: {payload}")
            if pending:
                await asyncio.sleep(0)  # let this process's own case runs go on between records

    def close(self, *, abandon: bool = False) -> None:
        """Wait for the workers to end (they have sent everything), or with ``abandon`` (the run
        failed or was interrupted) stop them at once."""
        for proc in self.procs:
            if abandon:
                proc.terminate()
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
        self.queue.close()


@contextlib.contextmanager
def started(config: ProjectConfig, request: RunRequest, count: int,
            target: ShardWorker, method: str = "spawn") -> Iterator[Workers | None]:
    """Workers for shards 1..count-1 (None when the run takes one shard), each a process running
    ``target(config, shard_request, queue)``, started by ``method``; stopped on exit."""
    if count <= 1:
        yield None
        return
    workers = Workers(config, request, count, target, method)
    try:
        yield workers
    except BaseException:  # the run failed or was interrupted: what the workers still do is lost
        workers.close(abandon=True)
        raise
    workers.close()
