"""Case runs sharded over worker processes, so a big run uses every core.

Job ``i`` of a run belongs to shard ``i % count``. The running process keeps shard 0 and starts
one process per other shard; each builds its own project from the same config (its own engine,
gold server, read-only connections), runs the same request narrowed to its shard, and sends
each record back the moment it is finished. The running process counts them as its own (the
record, the event, the callback), in its job order, so the records are those of a one-process
run apart from timings.

Only modes that spend nothing shard (``Mode.shardable``): a dollar cap across processes needs
one spend ledger, which mode full's own loop keeps. Small runs stay in one process: starting a
worker (imports, engine, server) costs seconds, more than a few hundred case runs take.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import queue as queue_mod
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nl2sql_assets.redact import get_logger

if TYPE_CHECKING:
    from nl2sql_assets.config import ProjectConfig
    from nl2sql_assets.evaluation.running.modes import CaseJob, Mode
    from nl2sql_assets.evaluation.running.request import RunRequest

log = get_logger(__name__)

#: Below this many jobs per shard a run stays in one process.
MIN_JOBS_PER_SHARD = 300
#: The most worker processes a run starts by default (the machines this runs on have 2 cores).
DEFAULT_MAX_WORKERS = 2


class ShardError(RuntimeError):
    """A worker process failed; the message holds its error."""


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count``: the jobs whose index modulo ``count`` is ``index``."""

    index: int
    count: int

    def holds(self, job_index: int) -> bool:
        return job_index % self.count == self.index


def default_workers() -> int:
    return max(1, min(DEFAULT_MAX_WORKERS, os.cpu_count() or 1))


def shard_count(request: RunRequest, mode: Mode, jobs: int, *, custom_scorers: bool, budget: Any) -> int:
    """How many shards a run takes: 1 for a shard itself, a mode that spends, a shared budget,
    scorers written in code (a worker cannot rebuild them), or too few jobs."""
    if request.shard is not None or not mode.shardable or custom_scorers or budget is not None:
        return 1
    wanted = request.workers if request.workers is not None else default_workers()
    if request.workers is None:  # the default: only where every shard has enough to do
        wanted = min(wanted, max(1, jobs // MIN_JOBS_PER_SHARD))
    return max(1, min(wanted, jobs))


def portable(scorers: dict[str, Any]) -> bool:
    """Whether a worker process builds the same scorers by name: built-ins and installed plugins
    (scorers added in code live in this process only)."""
    from nl2sql_assets.evaluation.running.scorers import BUILTIN_SCORERS, _entry_point_classes

    return all(BUILTIN_SCORERS.get(name) is type(s) or _entry_point_classes().get(name) is type(s)
               for name, s in scorers.items())


# ---------------------------------------------------------------- the worker side


def _worker(config: ProjectConfig, request: RunRequest, out: Any) -> None:
    """A worker process: run the request (narrowed to its shard) and send each record back."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        from nl2sql_assets.project import Project

        last = 0.0

        def on_case(config_name: str, record: Any, spent: float) -> None:
            nonlocal last
            out.put(("record", record.model_dump_json(), spent - last))
            last = spent

        from nl2sql_assets.evaluation.running.runner import run_cases

        with Project(config) as project:  # its own engine, connections and (temporary) index copies
            runs = run_cases(request, project.engine, scorers=project.scorers, on_case=on_case)
        unknown = {name: c.unknown_cost_calls for name, c in runs.meta.configs.items()}
        out.put(("done", unknown, None))
    except BaseException as exc:  # everything goes back to the running process
        out.put(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}", None))


# ---------------------------------------------------------------- the running side


class Workers:
    """The worker processes of one run, and the records they send."""

    def __init__(self, config: ProjectConfig, request: RunRequest, count: int) -> None:
        ctx = multiprocessing.get_context("spawn")  # never fork a process with threads and a loop
        self.queue = ctx.Queue()
        self.procs = []
        for index in range(1, count):
            shard_request = request.model_copy(update={"shard": (index, count)})
            proc = ctx.Process(target=_worker, args=(config, shard_request, self.queue), daemon=True,
                               name=f"nl2sql-shard-{index}-of-{count}")
            proc.start()
            self.procs.append(proc)
        self.unknown_cost_calls: dict[str, int] = {}

    async def collect(self, count_record: Any, jobs: Sequence[CaseJob]) -> None:
        """Count each record as it comes (``count_record(job, record, cost)``) until every worker is done."""
        from nl2sql_assets.evaluation.running.results import CaseRecord

        by_key = {(j.config, j.rr.suite, j.rr.case.id, j.rr.role, j.pass_index): j for j in jobs}
        waiting = len(self.procs)
        while waiting:
            try:
                kind, payload, extra = await asyncio.to_thread(self.queue.get, True, 1.0)
            except queue_mod.Empty:
                dead = [p for p in self.procs if not p.is_alive() and p.exitcode not in (0, None)]
                if dead:
                    raise ShardError(f"worker {dead[0].name} died (exit code {dead[0].exitcode})") from None
                continue
            if kind == "record":
                record = CaseRecord.model_validate_json(payload)
                job = by_key[(record.config, record.suite, record.case_id, record.role, record.pass_index)]
                count_record(job, record, extra)
            elif kind == "done":
                for name, n in payload.items():
                    self.unknown_cost_calls[name] = self.unknown_cost_calls.get(name, 0) + n
                waiting -= 1
            else:
                raise ShardError(f"a worker process failed: {payload}")

    def close(self) -> None:
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
        self.queue.close()


@contextlib.contextmanager
def started(config: ProjectConfig, request: RunRequest, count: int) -> Iterator[Workers | None]:
    """Workers for shards 1..count-1 (None when the run takes one shard); stopped on exit."""
    if count <= 1:
        yield None
        return
    workers = Workers(config, request, count)
    try:
        yield workers
    finally:
        workers.close()
