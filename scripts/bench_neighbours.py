#!/usr/bin/env python
"""Benchmark: neighbour databases on Chinook (NL2SQL_CHINOOK, or --chinook PATH).

    python scripts/bench_neighbours.py                  # 24 candidates, keep 10, seed 1
    python scripts/bench_neighbours.py --candidates 40 --keep 10
    python scripts/bench_neighbours.py --grade 1000     # and eval grade --neighbours, whole command
    python scripts/bench_neighbours.py --duckdb         # and the demo's DuckDB datasources
    python scripts/bench_neighbours.py --held-out FILE  # near misses kept outside the repository

Prints the time to generate the candidate neighbours and to distill them (the gold suite's
mutants run on the original and every candidate), how many mutants the original alone separates,
how many the kept neighbours add, what is left possibly equivalent (by rule), and the equivalence
check: every reviewed alternative of a case, its gold rewritten by sqlglot's optimizer and its gold
with its columns aliased, graded on the original and the kept neighbours, must pass (any failure
is printed: it would be a false overturn). With ``--grade N``: ``eval grade --neighbours K`` as a
whole command on a demo project and a suite of at least N cases (copies of the Chinook suite's), each
predicted by its gold SQL (so every one passes on Chinook and is graded on every neighbour): the
first run builds the neighbours, the second reads them back.

The witness search (``--witness N`` candidates a pass, 32 by default): every mutant the kept
neighbours do not separate is searched, as a pass that held on every kept neighbour would be; the
catch rate is what the original, the kept neighbours and the search separate, of what any database
separates (the original, a candidate or a witness). Every equivalent rewrite is searched too: a
witness found for one would be a false overturn (printed). ``--held-out FILE``: a YAML file of
near misses and equivalents of the Chinook gold (``near:`` and ``equivalent:``, each a ``case`` and
its ``sql``), kept outside the repository so the generator is never tuned on it: prints how many
near misses that pass on the original are caught, and any equivalent overturned.
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
    parser.add_argument("--witness", type=int, default=32, metavar="N",
                        help="candidate databases the witness search tries a pass (0: no search)")
    parser.add_argument("--held-out", default=None, metavar="FILE",
                        help="near misses and equivalents of the Chinook gold kept outside the repository")
    args = parser.parse_args()
    if not args.chinook:
        print("error: give --chinook PATH or set NL2SQL_CHINOOK", file=sys.stderr)
        return 2
    import sqlglot
    from sqlglot.optimizer import optimize

    from nl2sql_assets.evaluation.neighbours import GoldQuery, distill, generate_neighbours, gold_literals
    from nl2sql_assets.evaluation.neighbours.generate import targeted_neighbours
    from nl2sql_assets.evaluation.neighbours.verdict import neighbour_verdict
    from nl2sql_assets.evaluation.neighbours.witness import WitnessSearch, search_all
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
        drawn = len(pool)
        pool += targeted_neighbours(source, Path(tmp), [g.sql for g in golds], args.candidates, args.seed,
                                    start=drawn, max_rows=args.max_rows)
        generated_s = time.perf_counter() - started
        started = time.perf_counter()
        result = distill(golds, source, pool, args.keep)
        distilled_s = time.perf_counter() - started
        kept = [pool[i] for i in result.kept]
        print(f"Chinook, {len(golds)} gold queries, {drawn} drawn candidates of at most {args.max_rows} rows a "
              f"table and {len(pool) - drawn} built for the gold's trees (seed {args.seed}), keep {args.keep}")
        targeted_kept = [i for i in result.kept if i >= drawn]
        print(f"  kept                {len(result.kept)} ({len(targeted_kept)} of them targeted)")
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
        search = WitnessSearch(source, "sqlite", candidates=args.witness, seed=args.seed) if args.witness else None
        by_key = {g.key: g for g in golds}
        if search is not None:
            _witness_catch(result, kept, by_key, search, search_all, source)

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
        rewrites += _plans_sql(by_key)
        started = time.perf_counter()
        false_overturns = []
        for key, kind, sql in rewrites:
            gold = by_key[key]
            verdict = neighbour_verdict(gold, sql, source, kept, witness=search)
            if not verdict.passed:
                where = "a witness" if verdict.by_witness else f"neighbour {verdict.neighbour}"
                false_overturns.append((key, kind, where, sql))
        graded_s = time.perf_counter() - started
        print(f"  equivalent rewrites graded           {len(rewrites)} in {graded_s:.2f} s (alternatives, optimizer "
              f"rewrites, aliased gold, the plans' SQL{', witness search on' if search else ''}); "
              f"failing on a neighbour, a witness or the original: {len(false_overturns)}")
        for key, kind, where, sql in false_overturns:
            print(f"    {key} {kind} ({where}): {' '.join(sql.split())[:160]}")
        if args.held_out:
            _held_out(Path(args.held_out), by_key, source, kept, search)
    if args.grade:
        _time_grading(args, source)
    if args.duckdb:
        _time_duckdb(args, source)
    return 0


def _witness_catch(result: object, kept: list[Path], by_key: dict[str, object], search: object,
                   search_all: object, source: Path) -> None:
    """The mutants the kept neighbours leave, searched for a witness: the catch rate on the
    project's own mutants and what the search costs a pass."""
    from nl2sql_assets.evaluation.neighbours.verdict import NeighbourJudge

    separated = set(result.on_original).union(*result.by_neighbour.values())  # type: ignore[attr-defined]
    left = [(k, i) for k, made in result.mutants.items() for i in range(len(made))  # type: ignore[attr-defined]
            if (k, i) not in separated]
    with NeighbourJudge(kept) as judge:  # what the kept set alone says of each (a candidate not kept may differ)
        held = [(k, i) for k, i in left
                if judge.overturn(by_key[k], result.mutants[k][i].sql, search=False).passed]  # type: ignore
    started = time.perf_counter()
    outcomes = search_all([(search, by_key[k], result.mutants[k][i].sql) for k, i in held])  # type: ignore
    elapsed = time.perf_counter() - started
    found = [pair for pair, o in zip(held, outcomes, strict=True) if o.found]
    tried = [o.record.tried for o in outcomes if o.record is not None]
    caught_by_kept = len(left) - len(held)
    proven = len(separated) + caught_by_kept + len(found) + len(set(result.possibly_equivalent) & set(held)  # type: ignore
                                                                 ) * 0
    # separable: what any database tells apart (the original, any candidate, a witness)
    separable_known = result.separable  # type: ignore[attr-defined]
    witness_only = [pair for pair in found if pair in result.possibly_equivalent]  # type: ignore[attr-defined]
    separable = separable_known + len(witness_only)
    caught = len(separated) + caught_by_kept + len(found)
    rules = collections.Counter(result.mutants[k][i].rule for k, i in held  # type: ignore[attr-defined]
                                if (k, i) not in found)
    print(f"  witness search ({search.candidates} candidates a pass): {len(held)} mutants held on every kept "  # type: ignore
          f"neighbour; witnesses found for {len(found)} ({len(witness_only)} that no candidate separated) in "
          f"{elapsed:.2f} s, {elapsed / max(len(held), 1) * 1000:.0f} ms a pass, "
          f"{sum(tried) / max(len(tried), 1):.1f} candidates tried on average")
    print(f"  catch rate on the project's mutants   {caught}/{separable} separable "
          f"({caught / max(separable, 1):.1%}) with the kept neighbours and the search "
          f"(without the search {len(separated) + caught_by_kept}/{separable}); still held: "
          f"{', '.join(f'{r} {n}' for r, n in rules.most_common()) or 'none'}")
    del proven


def _plans_sql(by_key: dict[str, object]) -> list[tuple[str, str, str]]:
    """The SQL of the Chinook suite's hand-written plans, as the plans mode runs it: a reviewed
    answer each, that no neighbour and no witness may overturn."""
    from nl2sql_assets.engine.sqlgen import generate_sql
    from nl2sql_assets.evaluation.suites import load_suite
    from nl2sql_assets.paths import chinook_suite_path

    out = []
    for case in load_suite(chinook_suite_path()).cases:
        if case.id in by_key and case.plan is not None:
            out.append((case.id, "plan", generate_sql(case.plan, "sqlite")))
    return out


def _held_out(path: Path, by_key: dict[str, object], source: Path, kept: list[Path], search: object) -> None:
    """Held-out near misses: caught with the kept neighbours, and with the witness search."""
    import yaml

    from nl2sql_assets.evaluation.neighbours.verdict import neighbour_verdict

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    passing = caught_kept = caught = 0
    missed = []
    started = time.perf_counter()
    for item in data.get("near", []):
        gold = by_key[item["case"]]
        verdict = neighbour_verdict(gold, item["sql"], source, kept, witness=search)  # type: ignore[arg-type]
        if not verdict.passed_original:
            continue
        passing += 1
        caught += not verdict.passed
        caught_kept += not verdict.passed and not verdict.by_witness
        if verdict.passed:
            missed.append(item)
    bad = [item for item in data.get("equivalent", [])
           if not neighbour_verdict(by_key[item["case"]], item["sql"], source, kept,  # type: ignore[arg-type]
                                    witness=search).passed]
    print(f"  held-out near misses ({path.name}): {passing} pass on the original; caught by the kept neighbours "
          f"{caught_kept}, with the witness search {caught} ({caught / max(passing, 1):.1%}); "
          f"{time.perf_counter() - started:.2f} s")
    for item in missed:
        print(f"    missed {item['case']} ({item.get('kind', '')}): {' '.join(item['sql'].split())[:140]}")
    print(f"  held-out equivalents overturned: {len(bad)} of {len(data.get('equivalent', []))}")
    for item in bad:
        print(f"    OVERTURNED {item['case']}: {' '.join(item['sql'].split())[:140]}")


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
        import sqlglot

        predicted = {
            "the gold SQL": {c.id: c.sql for c in cases},
            # each a question of its own: the gold with a WHERE that keeps every row, so no two
            # predictions read the same and every pass is searched with the whole budget
            "each the gold with a WHERE n = n": {
                c.id: sqlglot.parse_one(c.sql or "", read="sqlite").where(f"{n} = {n}").sql("sqlite")
                for n, c in enumerate(cases)},
        }
        for what, answers in predicted.items():
            predictions = Path(tmp) / "predictions.json"
            predictions.write_text(json.dumps(answers), encoding="utf-8")
            base = [sys.executable, "-m", "nl2sql_assets.cli", "--config", str(project / "nl2sql.yaml"), "eval",
                    "grade", str(predictions), "--suite", str(suite), "--neighbours", str(args.keep),
                    "--neighbour-seed", str(args.seed)]
            runs = [("first (builds the neighbours)", ["--witness", "0"]), ("neighbours alone", ["--witness", "0"]),
                    (f"with the witness search ({args.witness} a pass)", ["--witness", str(args.witness)]),
                    ("the search's outcomes read back", ["--witness", str(args.witness)])]
            print(f"  eval grade --neighbours {args.keep}, {len(cases)} predictions: {what}")
            for label, extra in runs:
                if label.startswith("first") and what != "the gold SQL":
                    continue
                started = time.perf_counter()
                done = subprocess.run(base + extra, check=True, capture_output=True, text=True)
                elapsed = time.perf_counter() - started
                lines = [line for line in done.stdout.splitlines() if "on neighbours" in line]
                print(f"    {label}: {elapsed:.2f} s; {' '.join(lines)[:150]}")


if __name__ == "__main__":
    raise SystemExit(main())
