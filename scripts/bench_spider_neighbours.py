#!/usr/bin/env python
"""Benchmark: neighbour databases on Spider's dev set, and a real model's passes they overturn.

    python scripts/bench_spider_neighbours.py --spider DIR --predictions FILE [--rows 30] [--count 10]
        [--seed 1] [--keep DIR] [--show 40]

``DIR`` holds Spider's ``dev.json`` and ``tables.json``; ``FILE`` one predicted SQL per line in dev.json's
order (Spider's text format). Spider's databases are not needed: as ``bench_spider.py`` does, SQLite
files with generated rows are built from ``tables.json`` (``public_benchmarks/synthetic.py``) and
imported as a project. Printed, each with the time it took:

* per database of the dev set: generation and distillation of its neighbours (``neighbours.store``,
  every core), with its table count; the figures for the databases of 5 to 10 tables apart;
* ``eval grade --neighbours K`` as a whole command, twice (the first builds every set, the second reads
  them back): strict on the original and neighbour-robust, pairs per second;
* every pass a neighbour overturns: the question, the gold, the prediction, the neighbour and both
  results there (the first ``--show`` in full), so each can be read and judged by a person.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _cli(*argv: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "nl2sql_assets.cli", *argv], capture_output=True, text=True,
                          env=dict(os.environ))
    return time.perf_counter() - started, done


def _rows(rows: list[list[object]] | None, limit: int = 6) -> str:
    if rows is None:
        return "the database refused or failed it"
    shown = "; ".join(" | ".join("NULL" if v is None else str(v) for v in row) for row in rows[:limit])
    return f"{len(rows)} row(s): {shown}" + (" ..." if len(rows) > limit else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--spider", type=Path, required=True)
    parser.add_argument("--predictions", type=Path, required=True)
    parser.add_argument("--rows", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--keep", type=Path, default=None, help="work here and keep it (default: a temporary folder)")
    parser.add_argument("--show", type=int, default=40, help="overturned passes printed in full")
    parser.add_argument("--witness", type=int, default=32, help="candidates the witness search tries a pass")
    args = parser.parse_args()

    from nl2sql_assets.config import NeighbourSettings, load_config
    from nl2sql_assets.evaluation.neighbours.store import project_sets, project_suites
    from nl2sql_assets.evaluation.suites import load_suite
    from nl2sql_assets.paths import neighbours_dir
    from nl2sql_assets.public_benchmarks.synthetic import build_databases

    questions = json.loads((args.spider / "dev.json").read_text(encoding="utf-8"))
    predicted = args.predictions.read_text(encoding="utf-8").split("\n")[:len(questions)]
    db_ids = {q["db_id"] for q in questions}
    work = Path(args.keep or tempfile.mkdtemp(prefix="bench-spider-neighbours-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        folder = work / "spider"
        folder.mkdir(exist_ok=True)
        for name in ("dev.json", "tables.json"):
            shutil.copy(args.spider / name, folder / name)
        build_databases(folder / "tables.json", folder, rows=args.rows, seed=args.seed,
                        questions=folder / "dev.json", db_ids=db_ids)
        project = work / "project"
        shutil.rmtree(project, ignore_errors=True)
        _, done = _cli("bench", "import", "spider", str(folder), "--out", str(project), "--approve")
        if done.returncode != 0:
            print(done.stdout, done.stderr, file=sys.stderr)
            return 1
        suite_path = project / "suites" / "spider_dev.yaml"
        suite = load_suite(suite_path)
        config = load_config(project / "nl2sql.yaml")
        settings = NeighbourSettings(count=args.count, seed=args.seed)
        print(f"Spider dev: {len(questions)} questions over {len(db_ids)} databases of {args.rows} generated rows "
              f"a table; K {args.count}, {settings.candidates} candidates, seed {args.seed}; {os.cpu_count()} cores")

        # -- generation and distillation, database by database (each its own set, timed alone)
        per_db = []
        suites = project_suites(config, [("spider_dev", suite)])
        for db in sorted(db_ids):
            started = time.perf_counter()
            kept = project_sets(config, suites, settings, neighbours_dir(project), datasources=[db]).get(db)
            if kept is None:
                continue
            tables = len(kept.manifest.files[0].rows) if kept.manifest.files else 0
            per_db.append((db, tables, time.perf_counter() - started, kept.manifest))
        total = sum(s for _, _, s, _ in per_db)
        print(f"\nneighbours, {len(per_db)} databases: {total:.1f} s in all (generation "
              f"{sum(m.generation_s for *_, m in per_db):.1f} s, distillation {sum(m.distillation_s for *_, m in per_db):.1f} s)")
        for label, chosen in (("all", per_db), ("5-10 tables", [p for p in per_db if 5 <= p[1] <= 10])):
            if chosen:
                times = sorted(s for _, _, s, _ in chosen)
                print(f"  {label}: {len(chosen)} databases, per database min {times[0]:.2f} s, median "
                      f"{statistics.median(times):.2f} s, max {times[-1]:.2f} s")
        slowest = max(per_db, key=lambda p: p[2])
        print(f"  slowest: {slowest[0]} ({slowest[1]} tables) {slowest[2]:.2f} s")
        mutants = sum(m.mutants for *_, m in per_db)
        separable = sum(m.separable for *_, m in per_db)
        separated = sum(m.separated for *_, m in per_db)
        on_original = sum(m.separated_on_original for *_, m in per_db)
        print(f"  mutants {mutants}: the original separates {on_original}, with the kept neighbours {separated} of "
              f"{separable} separable ({separated / separable:.1%}); possibly equivalent "
              f"{sum(m.possibly_equivalent for *_, m in per_db)}; kept {sum(len(m.kept) for *_, m in per_db)} "
              f"neighbours in all")

        # -- eval grade --neighbours, whole command: the sets read back
        ids = [c.id for c in suite.cases]
        pred_file = work / "predictions.json"
        pred_file.write_text(json.dumps({i: sql.strip() for i, sql in zip(ids, predicted, strict=True)}))
        out = work / "grade.json"
        for attempt, witness in (("stored sets, no witness search", "0"),
                                 ("stored sets, the witness search's first", str(args.witness)),
                                 ("stored sets and search outcomes", str(args.witness))):
            seconds, done = _cli("--config", str(project / "nl2sql.yaml"), "eval", "grade", str(pred_file), "--suite",
                                 str(suite_path), "--neighbours", str(args.count), "--neighbour-seed", str(args.seed),
                                 "--witness", witness, "--out", str(out))
            if done.returncode != 0:
                print(done.stdout, done.stderr, file=sys.stderr)
                return 1
            lines = [line for line in done.stdout.splitlines() if line.startswith(("execution", "on neighbours"))]
            print(f"\neval grade --neighbours {args.count} ({attempt}), whole command {seconds:.2f} s:\n  "
                  + "\n  ".join(lines))

        report = json.loads(out.read_text(encoding="utf-8"))
        by_id = {c.id: c for c in suite.cases}
        overturned = [g for g in report["cases"] if g.get("overturned_on")]
        flags: dict[str, list[str]] = {}
        for flag in report.get("gold_audit", []):
            flags.setdefault(flag["case"], []).append(flag["kind"])
        witnessed = [g for g in overturned if g["neighbour_robust"]["reason"] == "fails_on_witness"]
        print(f"\n{len(overturned)} pass(es) overturned: {len(overturned) - len(witnessed)} on a kept neighbour, "
              f"{len(witnessed)} by a witness the search found; on gold the audit flags: "
              f"{sum(1 for g in overturned if g['case_id'] in flags)}")
        shown = sorted(overturned, key=lambda g: g["neighbour_robust"]["reason"] != "fails_on_witness")
        for g in shown[:args.show]:
            case = by_id[g["case_id"]]
            where = Path(g["overturned_on"]).name
            how = "witness" if g["neighbour_robust"]["reason"] == "fails_on_witness" else "neighbour"
            marks = f" [gold: {', '.join(flags[g['case_id']])}]" if g["case_id"] in flags else ""
            print(f"\n{g['case_id']} ({case.datasources[0]}){marks}: {case.question}\n  gold:       {case.sql}\n"
                  f"  prediction: {g['sql']}\n  on {how} {where}: gold {_rows(g['neighbour_gold_rows'])}"
                  f"\n  {' ' * (len(where) + len(how))}      prediction {_rows(g['neighbour_predicted_rows'])}")
        for g in shown[args.show:]:
            print(f"  {g['case_id']}: {g['sql']}")
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
