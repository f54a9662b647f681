"""The command-line side of public benchmarks, neighbours and engines: ``bench import``, ``bench wide``,
``eval grade`` (with ``--neighbours``), ``eval audit``, ``neighbours show``, ``serve``.

Kept apart from ``cli.py`` so that file only registers these commands and dispatches to them.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections import Counter
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_USAGE = 0, 2


def add_bench_commands(sub: Any, esub: Any, fmt: dict[str, Any]) -> None:
    """``bench import`` under ``sub`` and ``eval grade`` under ``esub``."""
    from nl2sql_assets.public_benchmarks import FORMATS

    bench = sub.add_parser("bench", help="public benchmarks (Spider, BIRD) and the generated wide test bed", **fmt)
    bsub = bench.add_subparsers(dest="bench_command", required=True, metavar="COMMAND")
    imp = bsub.add_parser("import", help="turn a Spider- or BIRD-format folder into a project and a draft suite",
                          description="Read a benchmark folder (nothing is downloaded) and write PROJECT/nl2sql.yaml "
                                      "(one SQLite datasource per database, read in place) and "
                                      "PROJECT/suites/<benchmark>_<split>.yaml with rows from the gold SQL.", **fmt)
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

    wide = bsub.add_parser("wide", help="build (or reuse) the wide test bed: 1,200 generated tables in six datasources",
                           description="Write PROJECT/nl2sql.yaml, evals.yaml and data/ (three SQLite, three DuckDB "
                                       "files), generated deterministically, nothing downloaded; a folder already "
                                       "holding this version's bed is reused. Then run its routing suite (the "
                                       "bed's evals.yaml names it) with: nl2sql-assets --config PROJECT eval run "
                                       "--mode retrieval", **fmt)
    wide.add_argument("--out", default=None, metavar="PROJECT",
                      help="the bed's folder (default: wide-<version> under the cache folder, $NL2SQL_CACHE_DIR)")
    wide.add_argument("--tables", type=int, default=None, metavar="N",
                      help="how many tables in all (default 1,200; fewer keep every core table: 96 at least)")
    wide.add_argument("--force", action="store_true", help="rebuild even when the folder holds this bed already")

    grade = esub.add_parser("grade", help="score a predictions file against a suite, no engine involved",
                            description="Run each predicted SQL read-only and compare it with the case's gold "
                                        "rows (strict and lenient execution match), on every core.", **fmt)
    grade.add_argument("predictions", metavar="PREDICTIONS",
                       help="a JSON object (case id -> SQL) or Spider's text format (one SQL per line in case "
                            "order, optionally a tab and the db id)")
    grade.add_argument("--suite", required=True, metavar="PATH", help="the suite whose cases are predicted")
    grade.add_argument("--workers", type=int, default=None, metavar="N", help="worker processes (default: cores)")
    grade.add_argument("--out", default=None, metavar="FILE", help="write the full report (JSON) here")
    add_neighbour_options(grade, "grade")

    audit = esub.add_parser("audit", help="flag gold SQL that tests less than it seems (ties, empty, slow, "
                                          "data-blind, disagreeing alternatives)",
                            description="The gold audit of a suite, on the original database and its kept "
                                        "neighbour databases (built once under warehouse/neighbours/, as eval "
                                        "grade --neighbours keeps them): each case's gold is flagged when its "
                                        "result leans on the rows' physical order, is empty, is far slower than "
                                        "the suite's median or times out, is the same on every database, or a "
                                        "reviewed alternative disagrees with it on a neighbour.",
                            epilog="exit codes: 0 audited (flags or not); 1 with --strict, a flag was raised; "
                                   "2 usage error", **fmt)
    audit.add_argument("suite", metavar="SUITE", help="the suite file to audit")
    audit.add_argument("--out", default=None, metavar="FILE", help="write the audit (JSON) here")
    audit.add_argument("--strict", action="store_true", help="exit 1 when any flag is raised")
    add_neighbour_options(audit, "audit", witness=False)


def add_neighbour_options(parser: Any, verb: str, *, witness: bool = True) -> None:
    """``--neighbours [K]`` and ``--neighbour-seed N``, for eval grade and eval run alike."""
    parser.add_argument("--neighbours", type=int, nargs="?", const=0, default=None, metavar="K",
                        help=f"also {verb} each pass on at most K neighbour databases of its datasource (SQLite or "
                             "DuckDB files made from its own rows and the gold's literals, kept by how many "
                             "near-miss mutants of the gold they tell apart; built once under "
                             "warehouse/neighbours/). Without K: evals.yaml's neighbours: count, else 10")
    parser.add_argument("--neighbour-seed", type=int, default=None, metavar="N",
                        help="the seed the neighbours are made from (evals.yaml's neighbours: seed, else 1; "
                             "another seed, another set)")
    if not witness:
        return
    parser.add_argument("--witness", type=int, default=None, metavar="N",
                        help="candidate databases the witness search tries for each pass that holds on every "
                             "kept neighbour, built for where the prediction differs from the gold (evals.yaml's "
                             "neighbours: witness, else 32; 0: no search)")


def neighbour_settings(args: argparse.Namespace, config: Any) -> Any:
    """The run's neighbour settings: evals.yaml's ``neighbours:`` with the flags over it (None:
    neither asks for neighbours)."""
    from nl2sql_assets.config import NeighbourSettings

    base = config.evals_config.neighbours
    if not asks_for_neighbours(args):
        return base
    settings = base.model_copy() if base is not None else NeighbourSettings()
    if args.neighbours:
        settings = settings.model_copy(update={"count": args.neighbours})
    if args.neighbour_seed is not None:
        settings = settings.model_copy(update={"seed": args.neighbour_seed})
    if getattr(args, "witness", None) is not None:
        settings = settings.model_copy(update={"witness": args.witness})
    try:
        return NeighbourSettings.model_validate(settings.model_dump())
    except ValueError as exc:
        from nl2sql_assets.errors import UsageError

        raise UsageError(f"neighbour options: {exc}") from None


def asks_for_neighbours(args: argparse.Namespace) -> bool:
    """Whether the command line names a neighbour setting (``--neighbours``, ``--neighbour-seed``,
    ``--witness``)."""
    return any(getattr(args, name, None) is not None for name in ("neighbours", "neighbour_seed", "witness"))


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


def cmd_grade(args: argparse.Namespace, config_path: Path) -> int:
    from nl2sql_assets.atomic import atomic_write
    from nl2sql_assets.evaluation.grading import gradable_cases, grade, read_predictions
    from nl2sql_assets.evaluation.suites.loader import load_suite
    from nl2sql_assets.project import load_project_config

    config = load_project_config(config_path)
    suite = load_suite(args.suite)
    cases = gradable_cases(suite)
    predictions = read_predictions(args.predictions, cases)
    report = grade(suite, predictions, {ds.id: ds for ds in config.datasources}, workers=args.workers,
                   predictions_name=str(args.predictions), cases=cases)
    settings = neighbour_settings(args, config) if asks_for_neighbours(args) else None
    if settings is not None:
        from nl2sql_assets.evaluation.grading import grade_on_neighbours

        report = grade_on_neighbours(report, suite, cases, config, settings)
    if args.out:  # written before anything is printed: a reader that stops early loses nothing
        atomic_write(Path(args.out), report.model_dump_json(indent=1) + "\n")
    s, lax = report.execution, report.execution_lenient
    print(f"{report.suite}: {report.graded} prediction(s) graded in {report.seconds:.2f} s on {report.workers} "
          f"worker(s) ({report.graded / max(report.seconds, 1e-9):.0f} pairs/s)")
    print(f"execution match strict {s.text()} ({s.passed}/{s.total}, 95% CI {s.low_high()}); "
          f"lenient {lax.text()} ({lax.passed}/{lax.total}, 95% CI {lax.low_high()})")
    for label, rates in report.by_difficulty.items():
        print(f"  {label}: strict {rates.strict.text()} ({rates.strict.passed}/{rates.strict.total}), "
              f"lenient {rates.lenient.text()} ({rates.lenient.passed}/{rates.lenient.total})")
    if report.reasons:
        print("failures: " + ", ".join(f"{reason} {n}" for reason, n in report.reasons.items()))
    if report.gold_errors:
        shown = ", ".join(report.gold_errors[:10]) + (f" and {len(report.gold_errors) - 10} more"
                                                      if len(report.gold_errors) > 10 else "")
        print(f"{len(report.gold_errors)} case(s) with a gold error, in no rate (their gold SQL did not run: "
              f"eval audit SUITE says why): {shown}")
    if report.execution_neighbours is not None:
        robust = report.execution_neighbours
        overturned = [g for g in report.cases if g.overturned_on]
        kept = ", ".join(f"{s['datasource']} {len(s['kept'])}" for s in report.neighbour_sets)
        flags: dict[str, list[str]] = {}
        for flag in report.gold_audit:
            flags.setdefault(flag["case"], []).append(flag["kind"])
        on_flagged = Counter(kind for g in overturned for kind in flags.get(g.case_id, []))
        read = (" (" + ", ".join(f"{n} on gold flagged {kind}" for kind, n in on_flagged.most_common())
                + ": read those with eval audit)") if on_flagged else ""
        witnessed = [g for g in overturned if g.neighbour_robust and g.neighbour_robust.reason == "fails_on_witness"]
        by_search = f", {len(witnessed)} by a witness the search found" if witnessed else ""
        print(f"on neighbours ({kept}): strict {robust.text()} ({robust.passed}/{robust.total}, "
              f"95% CI {robust.low_high()}); {len(overturned)} pass(es) overturned{by_search}{read}")
        for g in overturned:
            marks = f" [gold: {', '.join(flags[g.case_id])}]" if g.case_id in flags else ""
            how = "witness " if g in witnessed else ""
            print(f"  {g.case_id}: fails on {how}{Path(g.overturned_on or '').name}{marks}")
        if witnessed:
            print("  (a witness: nl2sql-assets neighbours show CASE --witness --suite SUITE --sql PREDICTION)")
    if args.out:
        print(f"report: {args.out}")
    return EXIT_OK


def cmd_audit(args: argparse.Namespace, config_path: Path) -> int:
    from nl2sql_assets.atomic import atomic_write
    from nl2sql_assets.config import NeighbourSettings
    from nl2sql_assets.evaluation.neighbours.audit import audit_suite
    from nl2sql_assets.evaluation.suites.loader import load_suite
    from nl2sql_assets.project import load_project_config

    config = load_project_config(config_path)
    path = Path(args.suite)
    suite = load_suite(path)
    settings = neighbour_settings(args, config) or NeighbourSettings()
    audit = audit_suite(config, suite.name or path.stem, suite, settings)
    if args.out:
        atomic_write(Path(args.out), audit.model_dump_json(indent=1) + "\n")
    counts = ", ".join(f"{kind} {n}" for kind, n in audit.counts.items()) or "none"
    median = f"{audit.median_ms:.1f} ms" if audit.median_ms is not None else "n/a"
    print(f"{audit.suite}: {audit.cases} gold queries audited in {audit.seconds:.1f} s (median {median}); "
          f"flags: {counts}")
    for flag in audit.flags:
        print(f"  {flag.case}: {flag.kind}: {flag.message}")
    for datasource, folder in audit.sets.items():
        print(f"neighbours of {datasource}: {folder} (see: nl2sql-assets neighbours show CASE N --suite {path})")
    if args.out:
        print(f"audit: {args.out}")
    return 1 if args.strict and audit.flags else EXIT_OK


def add_neighbours_command(sub: Any, fmt: dict[str, Any]) -> None:
    neighbours = sub.add_parser("neighbours", help="look at the neighbour databases eval run and eval grade keep",
                                description="Neighbour databases of a suite's datasources (see eval grade "
                                            "--neighbours).", **fmt)
    nsub = neighbours.add_subparsers(dest="neighbours_command", required=True)
    show = nsub.add_parser(
        "show", help="one neighbour's (or witness's) rows that a case reads, and the gold's and a prediction's "
                     "result there",
        description="Print the rows a case's gold reads on one kept neighbour database (N), or on a witness "
                    "database the witness search found for one of the case's predictions (no N: the witness of "
                    "--sql, else every witness found for the case, the first shown), and the gold's and the "
                    "prediction's result there. Writes nothing; exit 2 where there is no such neighbour or "
                    "witness.", **fmt)
    show.add_argument("case", metavar="CASE", help="the case id")
    show.add_argument("number", type=int, nargs="?", default=None, metavar="N",
                      help="the neighbour's number in its set (0 is the first kept); left out: a witness")
    show.add_argument("--suite", required=True, metavar="PATH", help="the suite the case belongs to")
    show.add_argument("--sql", default=None, help="a prediction to run there beside the gold (without N: the "
                                                  "prediction whose witness to show)")
    add_neighbour_options(show, "grade", witness=False)
    show.add_argument("--rows", type=int, default=20, metavar="N", help="rows shown per table (default 20)")


def cmd_neighbours(args: argparse.Namespace, config_path: Path) -> int:
    import sqlglot
    from sqlglot import exp

    from nl2sql_assets.config import NeighbourSettings
    from nl2sql_assets.errors import UserError
    from nl2sql_assets.evaluation.neighbours.distill import rows_or_none
    from nl2sql_assets.evaluation.neighbours.formats import format_of
    from nl2sql_assets.evaluation.neighbours.store import (
        gold_query,
        neighbour_cases,
        project_sets,
        project_suites,
    )
    from nl2sql_assets.evaluation.suites.loader import load_suite
    from nl2sql_assets.paths import neighbours_dir
    from nl2sql_assets.project import load_project_config

    config = load_project_config(config_path)
    suite = load_suite(args.suite)
    case = next((c for c in neighbour_cases(suite) if c.id == args.case), None)
    if case is None:
        raise UserError(f"{args.suite}: no case {args.case!r} with gold SQL on one datasource to show")
    datasource = case.datasources[0]
    settings = neighbour_settings(args, config) or NeighbourSettings()
    name = suite.name or Path(args.suite).stem
    kept = project_sets(config, project_suites(config, [(name, suite)]), settings, neighbours_dir(config.root),
                        datasources=[datasource])[datasource]
    paths = kept.paths
    files = format_of(kept.engine)
    if args.number is None:
        path, prediction = _witness_to_show(kept, gold_query(case, name), args.sql)
        args.sql = args.sql or prediction
    else:
        if not 0 <= args.number < len(paths):
            raise UserError(f"neighbour {args.number}: the set of {datasource!r} keeps {len(paths)} "
                            f"(0 to {len(paths) - 1})")
        path = paths[args.number]
        print(f"{case.id} on {path} (set {kept.manifest.key} of {datasource!r}: {len(paths)} kept, "
              f"seed {kept.manifest.seed})")
    tables = sorted({t.name for t in sqlglot.parse_one(case.sql or "", read=files.dialect).find_all(exp.Table)
                     if t.name})
    adapter = files.open(path)
    try:
        for table in tables:
            out = rows_or_none(adapter, f'SELECT * FROM "{table}" LIMIT {int(args.rows) + 1}')
            if out is None:
                continue  # a CTE's name, not a table of the database
            shown = out[: args.rows]
            print(f"\n{table} ({len(shown)}{'+' if len(out) > args.rows else ''} rows shown)")
            for row in shown:
                print("  " + " | ".join("NULL" if v is None else str(v) for v in row))
        for label, sql in (("gold", case.sql), ("prediction", args.sql)):
            if sql is None:
                continue
            got = rows_or_none(adapter, sql)
            print(f"\n{label}: " + ("the database refused or failed it" if got is None else f"{len(got)} row(s)"))
            for row in (got or [])[: args.rows]:
                print("  " + " | ".join("NULL" if v is None else str(v) for v in row))
    finally:
        adapter.close()
    return EXIT_OK


def _witness_to_show(kept: Any, gold: Any, sql: str | None) -> tuple[Path, str]:
    """The witness database to show for a case (that of prediction ``sql``, else the first found
    for the case), after a line for each witness found; UserError where there is none."""
    from nl2sql_assets.errors import UserError
    from nl2sql_assets.evaluation.neighbours.witness import FOLDER, prediction_digest, witness_sidecars

    found = [r for r in witness_sidecars(kept.home) if r.gold == gold.key or r.gold_sql == gold.sql]
    if sql is not None:
        found = [r for r in found if prediction_digest(r.predicted_sql) == prediction_digest(sql)]
    if not found:
        what = "this prediction" if sql is not None else "any prediction of this case"
        raise UserError(f"no witness found for {what} in {kept.home / FOLDER} (a witness is searched for when a "
                        "pass holds on every kept neighbour: eval grade or eval run with neighbours; give N to see "
                        "a kept neighbour)")
    for record in found:
        print(f"witness {record.file}: {' '.join(record.predicted_sql.split())[:120]}  "
              f"[{', '.join(record.kinds)}; built by {', '.join(record.strategies)}; tried {record.tried}]")
    first = found[0]
    path = kept.home / FOLDER / (first.file or "")
    print(f"\n{gold.key.split('/')[-1]} on the witness {path} (set {kept.manifest.key}): "
          f"{', '.join(f'{t} {n}' for t, n in first.rows.items() if n)} rows")
    return path, first.predicted_sql


def add_serve_command(sub: Any, fmt: dict[str, Any]) -> None:
    serve = sub.add_parser("serve", help="serve the built-in engine over the HTTP engine contract (POST /ask)",
                           description="The reference server of docs/engine-api.openapi.yaml: the project's "
                                       "built-in engine behind POST /ask, for testing an HTTP client.", **fmt)
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    serve.add_argument("--port", type=int, default=8765, help="the port to listen on (0: any free port)")
    serve.add_argument("--gold", default=None, metavar="SUITE",
                       help="answer on the gold LLM of this suite's cases (no key, nothing spent): to test a "
                            "client or the evaluation of an HTTP engine end to end")


def cmd_serve(args: argparse.Namespace, config_path: Path) -> int:
    from nl2sql_assets.engines import BuiltinEngine, EngineServer
    from nl2sql_assets.project import Project
    from nl2sql_assets.signals import defaults

    defaults()  # a server stops on SIGTERM and SIGHUP whatever its parent ignored
    with Project.load(config_path) as project, contextlib.ExitStack() as stack:
        engine = project.engine
        if args.gold:
            from nl2sql_assets.evaluation.running.gold_llm import GoldLLMServer
            from nl2sql_assets.evaluation.suites import load_suite

            suite = load_suite(project.config.resolve(args.gold))
            gold = stack.enter_context(GoldLLMServer(suite.cases, engine.bus, synthesizer="rows",
                                                     curated=project.config.curated))
            engine = engine.derive(llm=gold.llm_config(), plan_cache=False)
        server = EngineServer(BuiltinEngine(engine), args.host, args.port)
        print(f"serving the built-in engine at {server.url}/ask (Ctrl-C stops)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    return EXIT_OK
