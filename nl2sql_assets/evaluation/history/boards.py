"""Boards from the warehouse: a config's board over every stored pass of its newest series, and a
suite's report with every config's board side by side (what the scoreboards and the eval report
assets show). Passes are stored apart, one per partition; their RunMetas merge here. The records
come from any ``StoredPasses``: the file warehouse (the default) or its Postgres copy (the cluster
profile, ``pg_warehouse.PgCaseRecords``), so every machine of a cluster builds the same boards."""

from __future__ import annotations

from typing import Any, Protocol

from nl2sql_assets.evaluation.reporting.board import EvalReport
from nl2sql_assets.evaluation.reporting.report import build_report
from nl2sql_assets.evaluation.running.modes import MODES
from nl2sql_assets.evaluation.running.results import CaseRecord, ConfigMeta, RunMeta, RunStamp
from nl2sql_assets.llm.calls import combine_sources


class StoredPasses(Protocol):
    """Where a suite's stored passes are read from (Warehouse, PgCaseRecords)."""

    @property
    def location(self) -> str: ...

    def passes(self, suite: str, config: str) -> list[int]: ...

    def configs(self, suite: str) -> list[str]: ...

    def read_pass(self, suite: str, config: str, pass_index: int) -> tuple[list[CaseRecord], dict[str, Any] | None]: ...


def merge_metas(metas: list[RunMeta], config_name: str) -> RunMeta:
    """One RunMeta for several passes of one config: counts summed, the stamp spanning them."""
    if not metas:
        raise ValueError(f"no stored passes for config {config_name!r}")
    first = metas[0]
    planned = sum(sum(c.planned_cases for c in m.configs.values()) for m in metas)
    completed = sum(sum(c.completed_cases for c in m.configs.values()) for m in metas)
    unknown = sum(sum(c.unknown_cost_calls for c in m.configs.values()) for m in metas)
    estimated = sum(sum(c.estimated_calls for c in m.configs.values()) for m in metas)
    cap_stopped = sum(sum(c.stopped_by_cap for c in m.configs.values()) for m in metas)
    source = combine_sources(c.token_source for m in metas for c in m.configs.values())
    env_errors: dict[str, int] = {}
    for meta in metas:
        for kind, n in meta.env_errors.items():
            env_errors[kind] = env_errors.get(kind, 0) + n
    models = next(iter(first.configs.values())).models if first.configs else {}
    stamp = RunStamp.model_validate({
        **first.run_stamp.model_dump(),
        "started_at": min(m.run_stamp.started_at for m in metas),
        "finished_at": max(m.run_stamp.finished_at for m in metas),
    })
    return first.model_copy(update={
        "passes": len(metas),
        "spent": sum(m.spent for m in metas),
        "stopped": next((m.stopped for m in metas if m.stopped), None),
        "incomplete": any(m.incomplete for m in metas),
        "env_errors": dict(sorted(env_errors.items())),
        "breaker": next((m.breaker for m in metas if m.breaker), None),
        "skipped": sum(m.skipped for m in metas),
        "configs": {config_name: ConfigMeta(models=models, planned_cases=planned, completed_cases=completed,
                                            unknown_cost_calls=unknown, estimated_calls=estimated,
                                            token_source=source, env_errors=dict(sorted(env_errors.items())),
                                            stopped_by_cap=cap_stopped)},
        "run_stamp": stamp,
    })


def _series(meta: RunMeta) -> tuple:
    """What makes passes comparable: the mode, the suites' digests and the schema fingerprints."""
    return (meta.mode, tuple(sorted(x.digest for x in meta.suites)),
            tuple(sorted(d.schema_fingerprint for d in meta.databases)))


def stored_board(suite_name: str, config_name: str, warehouse: StoredPasses) -> tuple[list[CaseRecord], RunMeta]:
    """A config's records over every stored pass of the newest series (pass^k and determinism
    need them all), and one RunMeta for them. Passes stored before the suite or the schema
    changed are left out, and named in ``settings["passes_left_out"]``, rather than mixed into a
    board they do not belong to."""
    passes = []
    for n in warehouse.passes(suite_name, config_name):
        records, meta = warehouse.read_pass(suite_name, config_name, n)
        if meta is not None:
            passes.append((n, records, RunMeta.model_validate(meta)))
    if not passes:
        raise FileNotFoundError(
            f"no case runs stored for suite {suite_name!r}, config {config_name!r} in {warehouse.location}; "
            "materialise case_runs first"
        )
    newest = max(passes, key=lambda p: p[2].run_stamp.finished_at)
    kept = [p for p in passes if _series(p[2]) == _series(newest[2])]
    left_out = [n for n, _, _ in passes if n not in {k[0] for k in kept}]
    merged = merge_metas([m for _, _, m in kept], config_name)
    if left_out:
        merged = merged.model_copy(update={"settings": {**merged.settings, "passes_left_out": left_out}})
    return [r for _, records, _ in kept for r in records], merged


def scoreboard_report(suite_name: str, config_name: str, warehouse: StoredPasses) -> EvalReport:
    """A config's board over every stored pass of the newest series (see ``stored_board``)."""
    return build_report(*stored_board(suite_name, config_name, warehouse))


def suite_report(suite_name: str, warehouse: StoredPasses, configs: list[str] | None = None) -> EvalReport:
    """Every config's board side by side (the report's comparison). Boards are compared within
    one mode, the first in the registry's order that has boards: the LLM configs (mode full) when
    there are any, else plans, else retrieval. The configs of other modes are named in
    ``settings["configs_left_out"]``."""
    names = configs if configs is not None else warehouse.configs(suite_name)
    boards = {name: stored_board(suite_name, name, warehouse) for name in names}
    if not boards:
        raise FileNotFoundError(f"no scoreboards stored for suite {suite_name!r} in {warehouse.location}")
    order = list(MODES)
    mode = min((meta.mode for _, meta in boards.values()), key=order.index)
    same = [(records, meta) for records, meta in boards.values() if meta.mode == mode]
    left_out = [name for name, (_, meta) in boards.items() if meta.mode != mode]
    metas = [meta for _, meta in same]
    settings = dict(metas[0].settings)
    if left_out:
        settings["configs_left_out"] = left_out
    merged = metas[0].model_copy(update={
        "configs": {k: v for m in metas for k, v in m.configs.items()},
        "spent": sum(m.spent for m in metas),
        "passes": max(m.passes for m in metas),
        "settings": settings,
    })
    return build_report([r for records, _ in same for r in records], merged)
