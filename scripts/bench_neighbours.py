#!/usr/bin/env python
"""Benchmark: neighbour databases on Chinook (NL2SQL_CHINOOK, or --chinook PATH).

    python scripts/bench_neighbours.py                  # 24 candidates, keep 10, seed 1
    python scripts/bench_neighbours.py --candidates 40 --keep 10
    python scripts/bench_neighbours.py --grade 1000     # and eval grade --neighbours, whole command
    python scripts/bench_neighbours.py --duckdb         # and the demo's DuckDB datasources

Prints the time to generate the candidate neighbours and to distill them (the gold suite's
mutants run on the original and every candidate), how many mutants the original alone separates,
how many the kept neighbours add, what is left possibly equivalent (by rule), and the equivalence
check: every reviewed alternative of a case, its gold rewritten by sqlglot's optimizer and its gold
with its columns aliased, graded on the original and the kept neighbours, must pass (any failure
is printed: it would be a false overturn). With ``--grade N``: ``eval grade --neighbours K`` as a
whole command on a demo project and a suite of at least N cases (copies of the Chinook suite's), each
predicted by its gold SQL (so every one passes on Chinook and is graded on every neighbour): the
first run builds the neighbours, the second reads them back.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _schema(path: Path) -> dict[str, dict[str, str]]:
    """Table -> column -> type, for sqlglot's optimizer (it qualifies every column)."""
    import sqlite3

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: {r[1]: r[2] or "TEXT" for r in conn.execute(f'PRAGMA table_info("{t}")')} for t in tables}
    finally:
        conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--chinook", default=os.environ.get("NL2SQL_CHINOOK"))
    parser.add_argument("--candidates", type=int, default=24)
    parser.add_argument("--keep", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-rows", type=int, default=200)
    parser.add_argument("--grade", type=int, default=0, metavar="N", help="also time eval grade --neighbours")
    parser.add_argument("--duckdb", action="store_true",
                        help="also time the demo's two DuckDB datasources over the multi-domain suite's gold")
    args = parser.parse_args()
    if not args.chinook:
        print("error: give --chinook PATH or set NL2SQL_CHINOOK", file=sys.stderr)
        return 2
    import sqlglot
    from sqlglot.optimizer import optimize

    from nl2sql_assets.evaluation.neighbours import GoldQuery, distill, generate_neighbours, gold_literals
    from nl2sql_assets.evaluation.neighbours.verdict import neighbour_verdict
    from nl2sql_assets.evaluation.suites import load_suite
    from nl2sql_assets.paths import chinook_suite_path

    source = Path(args.chinook)
    schema = _schema(source)
    cases = [c for c in load_suite(chinook_suite_path()).cases if c.sql]
    golds = [GoldQuery(c.id, c.sql, c.order_matters, tuple(c.alt_sql)) for c in cases]
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        pool = generate_neighbours(source, Path(tmp), args.candidates, args.seed, max_rows=args.max_rows,
                                   literals=gold_literals([g.sql for g in golds]))
        generated_s = time.perf_counter() - started
        started = time.perf_counter()
        result = distill(golds, source, pool, args.keep)
        distilled_s = time.perf_counter() - started
        kept = [pool[i] for i in result.kept]
        print(f"Chinook, {len(golds)} gold queries, {args.candidates} candidates of at most {args.max_rows} rows a "
              f"table (seed {args.seed}), keep {args.keep}")
        print(f"  generation          {generated_s:6.2f} s")
        print(f"  distillation        {distilled_s:6.2f} s")
        print(f"  mutants             {result.total}")
        print(f"  separated on the original alone      {len(result.on_original)}")
        print(f"  separated by the {len(result.kept)} kept neighbours    "
              f"{result.separated - len(result.on_original)}")
        share = result.separated / result.separable if result.separable else float("nan")
        print(f"  separated of those separable         {result.separated}/{result.separable} ({share:.1%})")
        rules = collections.Counter(result.mutants[k][i].rule for k, i in result.possibly_equivalent)
        print(f"  possibly equivalent                  {len(result.possibly_equivalent)} "
              f"({', '.join(f'{r} {n}' for r, n in rules.most_common())})")

        rewrites: list[tuple[str, str, str]] = []
        for case in cases:
            for alternative in case.alt_sql:
                rewrites.append((case.id, "alternative", alternative))
            try:
                rewritten = optimize(sqlglot.parse_one(case.sql, read="sqlite"), schema=schema,
                                     dialect="sqlite").sql("sqlite")
            except Exception as exc:  # the optimizer needs a schema for some statements
                print(f"  (optimizer skipped {case.id}: {type(exc).__name__})")
            else:
                rewrites.append((case.id, "optimized", rewritten))
            tree = sqlglot.parse_one(case.sql, read="sqlite")
            if tree.find(sqlglot.exp.Union) is None and tree.find(sqlglot.exp.With) is None:
                aliased = tree.copy()
                aliased.set("expressions", [e if isinstance(e, sqlglot.exp.Alias) else e.as_(f"c{n}")
                                            for n, e in enumerate(aliased.expressions)])
                rewrites.append((case.id, "aliased", aliased.sql("sqlite")))
        started = time.perf_counter()
        false_overturns = []
        for key, kind, sql in rewrites:
            gold = next(g for g in golds if g.key == key)
            verdict = neighbour_verdict(gold, sql, source, kept)
            if not verdict.passed:
                false_overturns.append((key, kind, verdict.neighbour, sql))
        graded_s = time.perf_counter() - started
        print(f"  equivalent rewrites graded           {len(rewrites)} in {graded_s:.2f} s; "
              f"failing on a neighbour or the original: {len(false_overturns)}")
        for key, kind, neighbour, sql in false_overturns:
            print(f"    {key} {kind} (neighbour {neighbour}): {' '.join(sql.split())[:160]}")
    if args.grade:
        _time_grading(args, source)
    if args.duckdb:
        _time_duckdb(args, source)
    return 0


def _time_duckdb(args: argparse.Namespace, source: Path) -> None:
    """Generation and distillation of the demo's two DuckDB datasources over the multi-domain
    suite's gold (every core), and the gold audit of that suite."""
    import subprocess

    from nl2sql_assets.config import NeighbourSettings
    from nl2sql_assets.evaluation.neighbours.audit import audit_suite
    from nl2sql_assets.evaluation.neighbours.store import project_sets
    from nl2sql_assets.evaluation.suites import load_suite
    from nl2sql_assets.paths import neighbours_dir
    from nl2sql_assets.project import load_project_config

    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "demo"
        subprocess.run([sys.executable, "-m", "nl2sql_assets.cli", "init", "--demo", str(project), "--chinook",
                        str(source)], check=True, capture_output=True)
        config = load_project_config(project / "nl2sql.yaml")
        suite = load_suite(ROOT / "suites" / "multidomain.yaml")
        settings = NeighbourSettings(count=args.keep, seed=args.seed, candidates=args.candidates, max_rows=args.max_rows)
        for datasource in ("support", "webanalytics"):
            started = time.perf_counter()
            kept = project_sets(config, [("multidomain", suite)], settings, neighbours_dir(project),
                                datasources=[datasource])[datasource]
            m = kept.manifest
            print(f"  DuckDB {datasource}: {m.gold_queries} gold queries, {time.perf_counter() - started:.2f} s "
                  f"(generation {m.generation_s:.2f} s, distillation {m.distillation_s:.2f} s); mutants {m.mutants}, "
                  f"the original separates {m.separated_on_original}, with {len(m.kept)} kept {m.separated} of "
                  f"{m.separable} separable; possibly equivalent {m.possibly_equivalent}")
        sets = project_sets(config, [("multidomain", suite)], settings, neighbours_dir(project))  # chinook's too
        started = time.perf_counter()
        audit = audit_suite(config, "multidomain", suite, settings, sets=sets)
        print(f"  gold audit of multidomain ({audit.cases} gold queries on three datasources): "
              f"{time.perf_counter() - started:.2f} s; flags {audit.counts or 'none'}")


def _time_grading(args: argparse.Namespace, source: Path) -> None:
    import json
    import subprocess

    from benchlib import synthetic_suite

    from nl2sql_assets.evaluation.suites import load_suite

    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "demo"
        subprocess.run([sys.executable, "-m", "nl2sql_assets.cli", "init", "--demo", str(project), "--chinook",
                        str(source)], check=True, capture_output=True)
        suite = project / "suites" / "many.yaml"
        synthetic_suite(args.grade * 4, suite)  # counted in case runs: a case is asked of several roles
        cases = [c for c in load_suite(suite).cases if c.sql][: max(args.grade, 1)]
        predictions = Path(tmp) / "predictions.json"
        predictions.write_text(json.dumps({c.id: c.sql for c in cases}), encoding="utf-8")
        command = [sys.executable, "-m", "nl2sql_assets.cli", "--config", str(project / "nl2sql.yaml"), "eval",
                   "grade", str(predictions), "--suite", str(suite), "--neighbours", str(args.keep),
                   "--neighbour-seed", str(args.seed)]
        for label in ("first (builds the neighbours)", "again (reads them back)"):
            started = time.perf_counter()
            done = subprocess.run(command, check=True, capture_output=True, text=True)
            elapsed = time.perf_counter() - started
            lines = [line for line in done.stdout.splitlines() if "graded in" in line or "on neighbours" in line]
            print(f"  eval grade --neighbours {args.keep}, {len(cases)} predictions, {label}: {elapsed:.2f} s")
            for line in lines:
                print(f"    {line}")


if __name__ == "__main__":
    raise SystemExit(main())
