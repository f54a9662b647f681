#!/usr/bin/env python
"""Benchmark: what the final-SQL policy check costs per query, on every Chinook plan and reviewed SQL.

    python scripts/bench_policy.py [--repeat 5]

``cold`` is the first check of a statement (parse, qualify against the schema, walk every
scope, then the rules); ``warm`` is a repeat check of the same statement for another role
(the facts are cached per statement and schema, only the rules run). Mode plans checks each
case's SQL once per role, so a run pays one cold and two warm checks per case. Needs
NL2SQL_CHINOOK (the Chinook SQLite file).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    from nl2sql_assets.config import DatasourceAccess, DatasourceConfig
    from nl2sql_assets.datasources.sqlite import SqliteAdapter
    from nl2sql_assets.engine.sqlgen import generate_sql, qualify_plan
    from nl2sql_assets.evaluation.suites import load_suite
    from nl2sql_assets.paths import chinook_suite_path
    from nl2sql_assets.policy import check_sql
    from nl2sql_assets.policy.facts import _analyse_cached

    chinook = os.environ.get("NL2SQL_CHINOOK")
    if not chinook or not Path(chinook).is_file():
        print("set NL2SQL_CHINOOK to the Chinook SQLite file", file=sys.stderr)
        return 2
    schema = SqliteAdapter(DatasourceConfig(id="chinook", engine="sqlite", path=Path(chinook))).introspect()
    suite = load_suite(chinook_suite_path())
    statements = [generate_sql(qualify_plan(c.plan, schema), "sqlite") for c in suite.cases if c.plan is not None]
    statements += [s for c in suite.cases for s in (c.sql, *c.alt_sql) if s]
    roles = {"admin": DatasourceAccess(allow=["*"]), "analyst": DatasourceAccess(allow=["*"], deny=["Employee"]),
             "viewer": DatasourceAccess(allow=["Album", "Artist", "Genre", "MediaType", "Playlist",
                                               "PlaylistTrack", "Track"])}

    def one_pass() -> tuple[list[float], list[float]]:
        _analyse_cached.cache_clear()
        cold, warm = [], []
        for sql in statements:
            for i, (role, access) in enumerate(roles.items()):
                started = time.perf_counter()
                check_sql(sql, dialect="sqlite", schema=schema, access=access, role=role)
                (cold if i == 0 else warm).append(time.perf_counter() - started)
        return cold, warm

    one_pass()  # imports and first-use costs out of the way
    cold: list[float] = []
    warm: list[float] = []
    for _ in range(args.repeat):
        c, w = one_pass()
        cold += c
        warm += w

    def row(name: str, samples: list[float]) -> str:
        us = sorted(s * 1e6 for s in samples)
        p95 = us[int(0.95 * (len(us) - 1))]
        return (f"{name:<5} {len(us):>6}  median {statistics.median(us):>8.1f} us  mean {statistics.fmean(us):>8.1f} us"
                f"  p95 {p95:>8.1f} us  max {us[-1]:>8.1f} us")

    print(f"policy check, {len(statements)} Chinook statements (47 generated plans and the reviewed SQL), "
          f"{args.repeat} passes x 3 roles")
    print(row("cold", cold))
    print(row("warm", warm))
    per_case = statistics.fmean(cold) + 2 * statistics.fmean(warm)
    print(f"mode plans pays one cold and two warm checks per case: about {per_case * 1e6:.0f} us per case, "
          f"{per_case * 47 * 1e3:.1f} ms for the 47-case suite")
    return 0


if __name__ == "__main__":
    sys.exit(main())
