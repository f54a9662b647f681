"""Shard plans in Postgres: what the split stores is what every shard and the merge read back, a
new split replaces the whole plan, the merge learns which planned shards stored nothing, and a
suite edited since the split is refused by name."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from nl2sql_assets.evaluation.history.pg import pg_transaction
from nl2sql_assets.evaluation.history.pg_shard_plans import PgShardPlans, ShardPlan, ShardPlanError
from nl2sql_assets.evaluation.history.pg_shards import PgShardStore
from nl2sql_assets.evaluation.running.shards import cut
from nl2sql_assets.evaluation.suites import suite_digest
from tests.cluster.conftest import dsn


@pytest.fixture
def plans(pg_database: str) -> PgShardPlans:
    return PgShardPlans(dsn(pg_database), schema=f"plans_{uuid.uuid4().hex[:8]}")


def _plan(suite_file: Path, case_ids: list[str], size: int, plan_id: str = "p1") -> ShardPlan:
    return ShardPlan(plan_id=plan_id, suite="chinook", config="retrieval", pass_index=2,
                     suite_digest=suite_digest(suite_file), budget="backfill-x", planned_by="run-1",
                     shards=cut(case_ids, size))


@pytest.fixture
def suite_file(tmp_path: Path) -> Path:
    path = tmp_path / "chinook.yaml"
    path.write_text("name: chinook\ncases: []\n", encoding="utf-8")
    return path


def test_the_plan_read_back_is_the_plan_stored_and_a_new_split_replaces_it(plans: PgShardPlans, suite_file: Path):
    ids = [f"c{n}" for n in range(5)]
    first = _plan(suite_file, ids, 2)
    plans.save(first)
    assert plans.load("chinook", "retrieval", 2) == first
    assert [s.case_ids for s in plans.require("chinook", "retrieval", 2, "p1").shards] == [["c0", "c1"], ["c2", "c3"],
                                                                                            ["c4"]]
    assert plans.load("chinook", "retrieval", 1) is None  # another partition: nothing planned

    second = _plan(suite_file, ids[:3], 3, plan_id="p2")
    plans.save(second)
    assert plans.load("chinook", "retrieval", 2) == second  # one shard now: the old three are gone
    with pytest.raises(ShardPlanError, match=r"planned again since \(plan p2 by run run-1, not p1\)"):
        plans.require("chinook", "retrieval", 2, "p1")
    with pytest.raises(ShardPlanError, match=r"no shard plan stored.*re-execute all steps"):
        plans.require("routing", "retrieval", 2)
    with pytest.raises(ShardPlanError, match="has no shard 1"):
        second.shard(1)


def test_unstored_names_the_planned_shards_without_records(plans: PgShardPlans, suite_file: Path):
    plan = _plan(suite_file, [f"c{n}" for n in range(5)], 2)
    plans.save(plan)
    assert plans.unstored(plan) == [0, 1, 2]  # no shard table yet: nothing stored
    PgShardStore(plans.dsn, schema=plans.schema)
    with pg_transaction(plans.dsn) as cur:  # shard 1 stored (its meta and records do not matter here), another partition's 0
        for suite, pass_index, shard in (("chinook", 2, 1), ("chinook", 3, 0), ("routing", 2, 2)):
            cur.execute(f"INSERT INTO {plans.schema}.case_shards (suite, config, pass_index, shard, shards, worker, "
                        "meta, records, record_count) VALUES (%s, 'retrieval', %s, %s, 3, 'w1', '{}', '', 0)",
                        [suite, pass_index, shard])
    assert plans.unstored(plan) == [0, 2]


def test_a_suite_edited_since_the_split_is_refused_by_name(suite_file: Path):
    plan = _plan(suite_file, ["c0"], 1)
    plan.check_suite(suite_file)  # unchanged: runs
    plan.check_suite(suite_file, suite_digest(suite_file))
    suite_file.write_text("name: chinook\ncases: []\n# edited\n", encoding="utf-8")
    with pytest.raises(ShardPlanError, match=r"suite chinook \(.*chinook\.yaml\) changed since the split step "
                                             r"planned partition retrieval\|2"):
        plan.check_suite(suite_file)
