"""Each sharded case_runs partition's plan in Postgres: written once by the split step, read by
every shard step and by the merge step, on any machine.

Why: a shard takes its cases from the stored plan rather than reading the suite and planning
again, so the shards of one partition never disagree; the suite file's digest at the split is
kept beside them, and a shard whose suite file changed since refuses (``ShardPlanError``) rather
than run cases other than those planned. The merge step runs any planned shard that stored no
records (``unstored``): Dagster's re-execution from failure does not run mapped steps the failed
run never started (dagster-io/dagster#20925), so only the plan knows they are missing.

One row per (suite, config, pass, shard); a new split replaces a partition's rows in one
transaction. The plan stays after the merge (it says how the partition was cut) until the next
split of that partition replaces it.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from nl2sql_assets.config import StrictModel
from nl2sql_assets.evaluation.history.pg import pg_tables, pg_transaction
from nl2sql_assets.evaluation.history.pg_ledger import _ident
from nl2sql_assets.evaluation.history.pg_shards import PgShardStore
from nl2sql_assets.evaluation.running.shards import Shard


class ShardPlanError(RuntimeError):
    """A shard cannot run as planned: no plan stored, another plan since, or its suite changed."""


class ShardPlan(StrictModel):
    """How the split step cut one partition: its shards, the suite file it read (digest), the
    spend ledger every shard of the partition draws on, and the run that planned it."""

    plan_id: str
    suite: str
    config: str
    pass_index: int
    suite_digest: str  # running.results.SuiteRef.digest of the suite file at the split
    budget: str
    planned_by: str  # the run id of the split step
    shards: list[Shard]

    @property
    def partition(self) -> str:
        return f"{self.suite} {self.config}|{self.pass_index}"

    def shard(self, index: int) -> Shard:
        if not 0 <= index < len(self.shards):
            raise ShardPlanError(f"{self.partition}: plan {self.plan_id} has no shard {index} "
                                 f"(it has {len(self.shards)})")
        return self.shards[index]

    def check_suite(self, path: str | Path, digest: str | None = None) -> None:
        """Refuse when the suite file (``digest``: as a run read it; else read ``path`` now) is
        not the one the split planned from: its shards would run other cases than planned."""
        from nl2sql_assets.evaluation.suites import suite_digest

        now = digest if digest is not None else suite_digest(path)
        if now != self.suite_digest:
            raise ShardPlanError(
                f"suite {self.suite} ({path}) changed since the split step planned partition "
                f"{self.config}|{self.pass_index} (digest {self.suite_digest[:12]} then, {now[:12]} now): its "
                "shards would run other cases than planned, so none runs. Restore the file, or re-execute "
                "the whole run (all steps) so that the partition is planned again from the new file.")


class PgShardPlans:
    """``<schema>.shard_plans``: the current plan of each sharded partition."""

    def __init__(self, dsn: str, *, schema: str = "nl2sql") -> None:
        self.dsn = dsn
        self.schema = _ident(schema)
        with pg_tables(self.dsn, "nl2sql_assets.pg_shard_plans", self.schema) as cur:
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {self.schema}.shard_plans ("
                "suite text NOT NULL, config text NOT NULL, pass_index int NOT NULL, shard int NOT NULL, "
                "shards int NOT NULL, case_ids jsonb NOT NULL, plan_id text NOT NULL, suite_digest text NOT NULL, "
                "budget text NOT NULL, planned_by text NOT NULL, "
                "planned_at timestamptz NOT NULL DEFAULT clock_timestamp(), "
                "PRIMARY KEY (suite, config, pass_index, shard))"
            )

    def _transaction(self) -> contextlib.AbstractContextManager[Any]:
        return pg_transaction(self.dsn)

    def save(self, plan: ShardPlan) -> None:
        """Store ``plan`` as its partition's plan, replacing any earlier one, atomically."""
        with self._transaction() as cur:
            cur.execute(f"DELETE FROM {self.schema}.shard_plans WHERE suite = %s AND config = %s AND pass_index = %s",
                        [plan.suite, plan.config, plan.pass_index])
            cur.executemany(
                f"INSERT INTO {self.schema}.shard_plans (suite, config, pass_index, shard, shards, case_ids, "
                "plan_id, suite_digest, budget, planned_by) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                [[plan.suite, plan.config, plan.pass_index, s.index, s.count, json.dumps(s.case_ids), plan.plan_id,
                  plan.suite_digest, plan.budget, plan.planned_by] for s in plan.shards],
            )

    def load(self, suite: str, config: str, pass_index: int) -> ShardPlan | None:
        """The partition's current plan, or None when no split has planned it."""
        with self._transaction() as cur:
            cur.execute(f"SELECT shard, shards, case_ids::text, plan_id, suite_digest, budget, planned_by "
                        f"FROM {self.schema}.shard_plans WHERE suite = %s AND config = %s AND pass_index = %s "
                        "ORDER BY shard", [suite, config, pass_index])
            rows = cur.fetchall()
        if not rows:
            return None
        _, _, _, plan_id, digest, budget, planned_by = rows[0]
        shards = [Shard(index=index, count=count, case_ids=json.loads(ids)) for index, count, ids, *_ in rows]
        if [s.index for s in shards] != list(range(shards[0].count)) or {r[3] for r in rows} != {plan_id}:
            raise ShardPlanError(f"{suite} {config}|{pass_index}: the stored shard plan is not whole "
                                 f"(shards {[s.index for s in shards]}); re-execute the whole run")
        return ShardPlan(plan_id=plan_id, suite=suite, config=config, pass_index=pass_index, suite_digest=digest,
                         budget=budget, planned_by=planned_by, shards=shards)

    def require(self, suite: str, config: str, pass_index: int, plan_id: str | None = None) -> ShardPlan:
        """The partition's plan; with ``plan_id``, only if it is still that plan (a later split
        of the partition replaced it: this step belongs to a run that no longer counts)."""
        plan = self.load(suite, config, pass_index)
        if plan is None:
            raise ShardPlanError(f"{suite} {config}|{pass_index}: no shard plan stored in Postgres "
                                 f"({self.schema}.shard_plans); its split step has not run: re-execute all steps")
        if plan_id is not None and plan.plan_id != plan_id:
            raise ShardPlanError(f"{plan.partition}: planned again since (plan {plan.plan_id} by run "
                                 f"{plan.planned_by}, not {plan_id}); this step's shard no longer counts")
        return plan

    def unstored(self, plan: ShardPlan) -> list[int]:
        """The plan's shards with no records stored (``PgShardStore``), in shard order."""
        stored = PgShardStore(self.dsn, schema=self.schema).stored(plan.suite, plan.config, plan.pass_index)
        return [s.index for s in plan.shards if s.index not in stored]
