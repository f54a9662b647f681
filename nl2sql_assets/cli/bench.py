"""``bench import`` (a Spider- or BIRD-format folder as a project) and ``bench wide`` (the generated
wide test bed)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from nl2sql_assets.cli.common import EXIT_OK, add_command, add_group


def add(sub: Any) -> None:
    from nl2sql_assets.public_benchmarks import FORMATS

    bsub = add_group(sub, "bench", help="public benchmarks (Spider, BIRD) and the generated wide test bed",
                     description="Public benchmarks as projects of their own, and the generated wide test bed.",
                     dest="bench_command")
    imp = add_command(bsub, "import", cmd_bench, help="turn a Spider- or BIRD-format folder into a project and a draft suite",
                          description="Read a benchmark folder (nothing is downloaded) and write PROJECT/nl2sql.yaml "
                                      "(one SQLite datasource per database, read in place) and "
                                      "PROJECT/suites/<benchmark>_<split>.yaml with rows from the gold SQL. "
                                      "Exit 2 where the folder is not of that format.")
    imp.add_argument("benchmark", choices=list(FORMATS), help="the folder's format")
    imp.add_argument("folder", metavar="DIR", help="the benchmark folder (questions JSON, tables.json, databases)")
    imp.add_argument("--out", required=True, metavar="PROJECT", help="the project folder to write")
    imp.add_argument("--questions", default=None, metavar="FILE",
                     help="the questions file inside DIR (default: dev.json)")
    imp.add_argument("--split", default=None, help="the split's name (default: the questions file's stem)")
    imp.add_argument("--limit", type=int, default=None, metavar="N", help="import only the first N questions")
    imp.add_argument("--row-limit", type=int, default=10_000, metavar="N", help="each datasource's row limit")
    imp.add_argument("--timeout", type=float, default=30.0, metavar="S", help="each datasource's query timeout")
    imp.add_argument("--approve", action="store_true",
                     help="take the benchmark's gold as reviewed: cases whose gold SQL gave rows are written approved, "
                          "so eval run and the gate take them (default: drafts, for eval grade)")

    wide = add_command(bsub, "wide", cmd_wide, help="build (or reuse) the wide test bed: 1,200 generated tables in six datasources",
                           description="Write PROJECT/nl2sql.yaml, evals.yaml and data/ (three SQLite, three DuckDB "
                                       "files), generated deterministically, nothing downloaded; a folder already "
                                       "holding this version's bed is reused. Then run its routing suite (the "
                                       "bed's evals.yaml names it) with: nl2sql-assets --config PROJECT eval run "
                                       "--mode retrieval")
    wide.add_argument("--out", default=None, metavar="PROJECT",
                      help="the bed's folder (default: wide-<version> under the cache folder, $NL2SQL_CACHE_DIR)")
    wide.add_argument("--tables", type=int, default=None, metavar="N",
                      help="how many tables in all (default 1,200; fewer keep every core table: 96 at least)")
    wide.add_argument("--force", action="store_true", help="rebuild even when the folder holds this bed already")


def cmd_wide(args: argparse.Namespace) -> int:
    import time

    from nl2sql_assets.datasources.chinook import default_cache_dir
    from nl2sql_assets.testbed.wide import FULL_TABLES, WIDE_VERSION, build_wide

    total = args.tables if args.tables is not None else FULL_TABLES
    out = Path(args.out) if args.out else default_cache_dir() / f"wide-{WIDE_VERSION}-{total}"
    started = time.perf_counter()
    bed = build_wide(out, total_tables=total, force=args.force)
    how = "reused" if bed.reused else f"built in {time.perf_counter() - started:.1f} s"
    print(f"{bed.root}: the wide test bed, {bed.table_count} tables in {len(bed.tables)} datasources ({how})")
    print(f"run its routing suite (its evals.yaml names it): nl2sql-assets --config {bed.config} eval run "
          "--mode retrieval")
    return EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    from nl2sql_assets.public_benchmarks import import_benchmark

    if args.bench_command == "wide":
        return cmd_wide(args)

    report = import_benchmark(args.benchmark, args.folder, args.out, questions=args.questions, split=args.split,
                              limit=args.limit, row_limit=args.row_limit, timeout_s=args.timeout,
                              approve=args.approve)
    status = "approved where rows were written" if args.approve else "drafts"
    print(f"{report.suite}: {report.cases} {report.benchmark} {report.split} question(s) imported as {status} over "
          f"{report.databases} database(s); rows written for {report.with_rows}")
    print(f"{report.config}: the project (grade with: nl2sql-assets --config {report.config} eval grade "
          f"PREDICTIONS --suite {report.suite})")
    for failure in report.failed[:20]:
        print(f"  no rows for {failure.case_id}: {failure.reason}", file=sys.stderr)
    if len(report.failed) > 20:
        print(f"  ... and {len(report.failed) - 20} more", file=sys.stderr)
    return EXIT_OK
