"""The spend ledger in Postgres, so one backfill's cap holds across machines.

The same rules as the file ledger (``running.spend``): each case reserves the most expensive case
so far, each model call is checked against the dearest call of its node and spent when its cost
is known, and the case settles with what it really cost; the decision is taken while
holding a row lock on the budget's row (``SELECT ... FOR UPDATE``), so two workers never both
see room that only one case fits in. The total passes the cap by at most one case per worker
that is in flight when the cap is reached.

A worker killed mid-case leaves its reservation open. An open reservation older than
``stale_after_s`` counts as spent at its reserved amount (the call may have gone out and been
billed) and stops blocking: the cap stays safe and the backfill does not wait forever.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any, Literal

from nl2sql_assets.evaluation.history.pg import pg_tables, pg_transaction
from nl2sql_assets.evaluation.running.spend import call_entry
from nl2sql_assets.redact import redact

_SCHEMA = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _ident(schema: str) -> str:
    if not _SCHEMA.match(schema):
        raise ValueError(f"Postgres schema name {schema!r}: expected lower-case letters, digits and _")
    return schema


class PgSpendLedger:
    """Dollars spent under one budget, kept in ``<schema>.spend_budgets`` and ``<schema>.spend_entries``."""

    def __init__(self, dsn: str, budget: str, *, schema: str = "nl2sql", stale_after_s: float = 900.0) -> None:
        self.dsn = dsn
        self.budget = budget
        self.schema = _ident(schema)
        self.stale_after_s = stale_after_s
        with pg_tables(self.dsn, "nl2sql_assets.pg_ledger", self.schema) as cur:
            cur.execute(f"CREATE TABLE IF NOT EXISTS {self.schema}.spend_budgets (budget text PRIMARY KEY)")
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {self.schema}.spend_entries ("
                "id bigserial PRIMARY KEY, budget text NOT NULL, entry_id text NOT NULL, "
                "kind text NOT NULL CHECK (kind IN ('reserve', 'spend')), usd double precision NOT NULL, "
                "info jsonb NOT NULL DEFAULT '{}', at timestamptz NOT NULL DEFAULT clock_timestamp())"
            )
            cur.execute(f"CREATE INDEX IF NOT EXISTS spend_entries_budget ON {self.schema}.spend_entries "
                        "(budget, entry_id)")
            cur.execute(f"INSERT INTO {self.schema}.spend_budgets VALUES (%s) ON CONFLICT DO NOTHING", [budget])

    def _transaction(self) -> contextlib.AbstractContextManager[Any]:
        return pg_transaction(self.dsn)

    def _state(self, cur: Any, exclude: str | None = None) -> tuple[float, float, float, int, int]:
        """(spent, what the cases in flight may still spend (``exclude``'s left out), the most
        expensive case, open reservations, finished cases): ``running.spend.LedgerState``'s
        figures, computed in SQL. A call's entry (``info.call``) is spent at once and lowers what
        its case (``info.case``) still holds; a case's settlement carries its whole cost as
        ``info.case_cost`` (older entries: ``usd``)."""
        cur.execute(
            f"""WITH e AS (SELECT *, coalesce(info->>'call', '') = 'true' AS is_call
                           FROM {self.schema}.spend_entries WHERE budget = %(b)s),
                     settled AS (SELECT DISTINCT entry_id FROM e WHERE kind = 'spend' AND NOT is_call),
                     open AS (SELECT DISTINCT ON (entry_id) entry_id, usd, at FROM e
                              WHERE kind = 'reserve' AND entry_id NOT IN (SELECT entry_id FROM settled)
                              ORDER BY entry_id, id DESC),
                     used AS (SELECT info->>'case' AS entry_id, sum(usd) AS usd FROM e WHERE is_call
                              GROUP BY info->>'case'),
                     stale AS (SELECT * FROM open WHERE at < clock_timestamp() - make_interval(secs => %(t)s)),
                     live AS (SELECT open.entry_id, greatest(0, open.usd - coalesce(used.usd, 0)) AS left_usd
                              FROM open LEFT JOIN used USING (entry_id)
                              WHERE open.entry_id NOT IN (SELECT entry_id FROM stale))
                SELECT coalesce((SELECT sum(usd) FROM e WHERE kind = 'spend'), 0)
                         + coalesce((SELECT sum(usd) FROM stale), 0),
                       coalesce((SELECT sum(left_usd) FROM live WHERE entry_id IS DISTINCT FROM %(x)s), 0),
                       coalesce((SELECT max(coalesce((info->>'case_cost')::float8, usd)) FROM e
                                 WHERE kind = 'spend' AND NOT is_call), 0),
                       (SELECT count(*) FROM live),
                       (SELECT count(*) FROM settled)""",
            {"b": self.budget, "t": self.stale_after_s, "x": exclude},
        )
        spent, reserved, max_case, open_count, finished = cur.fetchone()
        return float(spent), float(reserved), float(max_case), int(open_count), int(finished)

    def _dearest(self, cur: Any, node: str) -> float:
        cur.execute(f"SELECT coalesce(max(usd), 0) FROM {self.schema}.spend_entries WHERE budget = %s "
                    "AND kind = 'spend' AND info->>'call' = 'true' AND info->>'node' = %s", [self.budget, node])
        return float(cur.fetchone()[0])

    def _lock(self, cur: Any) -> None:
        cur.execute(f"SELECT budget FROM {self.schema}.spend_budgets WHERE budget = %s FOR UPDATE", [self.budget])

    def totals(self) -> dict[str, float]:
        with self._transaction() as cur:
            spent, reserved, max_case, open_count, finished = self._state(cur)
        return {"spent": spent, "reserved": reserved, "max_case": max_case, "open": open_count,
                "finished": finished}

    def reserve(self, entry_id: str, cap: float) -> Literal["go", "wait", "stop"]:
        """As ``SpendLedger.reserve``: ``go`` (room reserved), ``wait`` (ask again) or ``stop``."""
        with self._transaction() as cur:
            self._lock(cur)
            spent, reserved, max_case, open_count, finished = self._state(cur)
            if finished == 0:
                if open_count:
                    return "wait"
                self._append(cur, entry_id, "reserve", 0.0, {})
                return "go"
            if spent + reserved + max_case > cap:
                return "wait" if open_count else "stop"
            self._append(cur, entry_id, "reserve", max_case, {})
            return "go"

    def spend(self, entry_id: str, usd: float, **info: Any) -> None:
        with self._transaction() as cur:
            self._lock(cur)
            self._append(cur, entry_id, "spend", usd, info)

    def reserve_call(self, entry_id: str, node: str, cap: float) -> Literal["go", "wait", "stop"]:
        """As ``SpendLedger.reserve_call``: may case ``entry_id``'s next ``node`` call go out."""
        with self._transaction() as cur:
            self._lock(cur)
            spent, others, _max_case, _open, finished = self._state(cur, exclude=entry_id)
            if finished == 0:
                return "go"
            return "stop" if spent + others + self._dearest(cur, node) > cap else "go"

    def spend_call(self, entry_id: str, node: str, usd: float) -> None:
        entry = call_entry(entry_id, node, usd)
        info = {k: v for k, v in entry.items() if k not in ("kind", "id", "usd")}
        with self._transaction() as cur:
            self._lock(cur)
            self._append(cur, entry["id"], "spend", usd, info)

    def _append(self, cur: Any, entry_id: str, kind: str, usd: float, info: dict[str, Any]) -> None:
        cur.execute(f"INSERT INTO {self.schema}.spend_entries (budget, entry_id, kind, usd, info) "
                    "VALUES (%s, %s, %s, %s, %s)",
                    [self.budget, entry_id, kind, usd, redact(json.dumps(info, sort_keys=True))])
