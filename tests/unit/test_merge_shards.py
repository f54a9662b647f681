"""merge_shards: the run that a partition's shards make together counts every shard, not the first."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from nl2sql_assets.evaluation.running.request import RunRequest
from nl2sql_assets.evaluation.running.results import CaseRuns, RunMeta
from nl2sql_assets.evaluation.running.shards import merge_shards


def _shard(minute: int, **facts: Any) -> CaseRuns:
    configs = facts.pop("configs", {})
    meta = RunMeta.model_validate({
        "mode": "full",
        "run_stamp": {"started_at": datetime(2026, 11, 30, 12, minute, tzinfo=UTC),
                      "finished_at": datetime(2026, 11, 30, 12, minute + 1, tzinfo=UTC),
                      "package_version": "0"},
        "configs": configs,
        **facts,
    })
    return CaseRuns(records=[], meta=meta)


def _cfg(**kw: Any) -> dict[str, Any]:
    return {"default": {"planned_cases": 2, "completed_cases": 2, **kw}}


REQUEST = RunRequest(mode="full")


def test_an_outage_in_a_later_shard_makes_the_partition_incomplete() -> None:
    quiet = _shard(0, spent=0.1, configs=_cfg(token_source="measured"))
    outage = _shard(5, spent=0.2, incomplete=True, env_errors={"server": 3}, breaker="default: provider down",
                    configs=_cfg(env_errors={"server": 3}, token_source="measured"))
    merged = merge_shards(REQUEST, [quiet, outage]).meta
    assert merged.incomplete is True
    assert merged.env_errors == {"server": 3}
    assert merged.breaker == "default: provider down"
    assert merged.configs["default"].env_errors == {"server": 3}
    assert merged.spent == 0.1 + 0.2


def test_counts_add_up_over_shards_and_token_sources_combine() -> None:
    a = _shard(0, env_errors={"timeout": 1}, incomplete=True,
               configs=_cfg(env_errors={"timeout": 1}, estimated_calls=2, token_source="estimated"))
    b = _shard(3, env_errors={"timeout": 2, "quota": 1}, incomplete=True,
               configs=_cfg(env_errors={"timeout": 2, "quota": 1}, estimated_calls=1, token_source="measured"))
    merged = merge_shards(REQUEST, [a, b]).meta
    assert merged.env_errors == {"quota": 1, "timeout": 3}
    cfg = merged.configs["default"]
    assert (cfg.planned_cases, cfg.completed_cases, cfg.estimated_calls) == (4, 4, 3)
    assert cfg.token_source == "mixed"
    assert merged.run_stamp.started_at == datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    assert merged.run_stamp.finished_at == datetime(2026, 11, 30, 12, 4, tzinfo=UTC)


def test_shards_without_outage_stay_complete() -> None:
    merged = merge_shards(REQUEST, [_shard(0, configs=_cfg()), _shard(1, configs=_cfg())]).meta
    assert merged.incomplete is False
    assert merged.env_errors == {}
    assert merged.breaker is None


def test_the_cases_the_cap_stopped_in_flight_are_counted_over_every_shard() -> None:
    """A case the cap stopped in a later shard still shows on the partition: its dollars are in the
    run's spent, so the count that explains them must be there too."""
    first = _shard(0, spent=0.3, stopped="max_cost", configs=_cfg(stopped_by_cap=0))
    later = _shard(2, spent=0.5, stopped="max_cost", configs=_cfg(stopped_by_cap=2))
    merged = merge_shards(REQUEST, [first, later]).meta
    assert merged.configs["default"].stopped_by_cap == 2
    assert merged.spent == 0.3 + 0.5 and merged.stopped == "max_cost"
