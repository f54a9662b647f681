"""One partition's case runs split into shards any worker can run, and the shards merged back.

A shard is a list of case ids: the runner's ``cases=`` selector runs exactly those (every role,
every pass asked for), so a shard is an ordinary run of a subset. Shards cut the approved cases
the mode runs into contiguous chunks in file order; the cases the mode leaves out ride with
shard 0, so the merged run counts them exactly as a single run does. Merging concatenates the
shards' records in shard order, which is the single run's order (pass, then case, then role).

The cluster profile (``nl2sql_assets.defs.cluster``) runs each shard as a Dagster step on a
Celery worker; this module knows nothing about either.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from nl2sql_assets.config import ProjectConfig, StrictModel
from nl2sql_assets.evaluation.running.modes import get_mode
from nl2sql_assets.evaluation.running.request import RunRequest
from nl2sql_assets.evaluation.running.results import CaseRuns, RunMeta
from nl2sql_assets.evaluation.running.selection import SelectionError, role_runs, select_cases


class Shard(StrictModel):
    """The cases one step runs: ``index`` of ``count`` shards of one partition."""

    index: int
    count: int
    case_ids: list[str]

    @property
    def key(self) -> str:
        """A step-key-safe name (Dagster mapping keys allow letters, digits and underscores)."""
        return f"shard_{self.index:04d}"


def plan_shards(request: RunRequest, config: ProjectConfig, shard_size: int) -> list[Shard]:
    """The shards of ``request``'s cases, ``shard_size`` runnable cases each (the last may be smaller)."""
    from nl2sql_assets.evaluation.suites import load_suite

    if shard_size < 1:
        raise SelectionError(f"shard size must be at least 1, got {shard_size}")
    paths = list(request.suites) if request.suites is not None else list(config.evals_config.suites)
    suites = []
    for p in paths:
        path = config.resolve(p)
        if not Path(p).is_absolute() and not path.exists() and Path(p).exists():
            path = Path(p).resolve()
        suite = load_suite(path)
        suites.append((suite.name or path.stem, suite))
    selected = select_cases(suites, request.cases)
    mode = get_mode(request.mode)
    # The runner's own steps: role runs, the kinds the mode runs, then the mode's selection (e.g.
    # retrieval keeps only cases some allowed role can answer), so no shard is left empty.
    runs, _ = role_runs(selected, request.roles, clarify=request.clarify)
    kept = [rr for rr in runs if rr.case.kind in mode.kinds]
    runnable = list(dict.fromkeys(rr.case.id for rr in (mode.select(kept) if kept else [])))
    others = [i for i in dict.fromkeys(sc.case.id for sc in selected) if i not in set(runnable)]
    chunks = [runnable[n:n + shard_size] for n in range(0, len(runnable), shard_size)] or [[]]
    chunks[0] = chunks[0] + others
    return [Shard(index=n, count=len(chunks), case_ids=ids) for n, ids in enumerate(chunks)]


def shard_request(request: RunRequest, shard: Shard) -> RunRequest:
    """The request that runs exactly one shard's cases."""
    return request.model_copy(update={"cases": list(shard.case_ids)})


def keep_own(runs: CaseRuns, shard: Shard) -> CaseRuns:
    """Only the shard's own cases (a case id that is also another case's tag selects both)."""
    own = set(shard.case_ids)
    return runs.model_copy(update={"records": [r for r in runs.records if r.case_id in own]})


def merge_shards(request: RunRequest, shards: Sequence[CaseRuns]) -> CaseRuns:
    """The single run the shards make together: records in shard order, counts summed, the
    request as the partition gave it, and the run stamp from the first start to the last end."""
    if not shards:
        raise SelectionError("nothing to merge: no shard ran")
    metas = [s.meta for s in shards]
    first = metas[0]
    configs = {}
    for name, c in first.configs.items():
        parts = [m.configs[name] for m in metas if name in m.configs]
        configs[name] = c.model_copy(update={
            "planned_cases": sum(p.planned_cases for p in parts),
            "completed_cases": sum(p.completed_cases for p in parts),
            "unknown_cost_calls": sum(p.unknown_cost_calls for p in parts),
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
    meta = RunMeta.model_validate({
        **first.model_dump(),
        "request": request,
        "roles": sorted({r for m in metas for r in m.roles}),
        "spent": sum(m.spent for m in metas),
        "stopped": stopped,
        "skipped": sum(m.skipped for m in metas),
        "left_out": left_out,
        "databases": list(databases.values()),
        "configs": configs,
        "run_stamp": stamp,
    })
    return CaseRuns(records=[r for s in shards for r in s.records], meta=meta)
