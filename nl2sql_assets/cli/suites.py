"""The suite commands of ``eval``: ``regenerate`` (rows from each case's SQL), ``import`` and
``export`` (JSONL gold sets), ``seed`` (drafts from a schema), ``publish`` (records and pages)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from nl2sql_assets.cli.common import EXIT_COST_CAP, EXIT_OK, add_command, load_project, project_config_path
from nl2sql_assets.errors import UsageError


def add(esub: Any) -> None:
    regen = add_command(
        esub, "regenerate", _cmd_eval_regenerate, help="write rows and alt_rows from each case's SQL",
        description="Run each approved case's gold SQL (and each reviewed alternative) read-only on its "
                    "datasource and write the rows into the suite file, in place: comments and layout kept, "
                    "written atomically. Exit 0 when every case's rows were written, 1 when a case's SQL "
                    "failed (each named), 2 on bad input.")
    regen.add_argument("path", help="the suite file to rewrite (comments are kept)")
    regen.add_argument("--allow-packaged", action="store_true",
                       help="allow rewriting a suite that ships with the package")

    imp = add_command(
        esub, "import", _cmd_eval_import, help="convert a JSONL gold set into a draft suite file",
        description="Read a JSONL gold set (one case a line: question, SQL, database, outcome) and write a new "
                    "suite file of draft cases, each line's problems named by line. Writes --out (never over "
                    "an existing file); exit 2 on bad input.")
    imp.add_argument("file", metavar="FILE.jsonl", help="the JSONL gold set (one case per line)")
    imp.add_argument("--out", required=True, metavar="PATH", help="the suite file to write (must not exist)")
    imp.add_argument("--database", default=None, metavar="ID",
                     help="the datasource of lines that name no database")
    imp.add_argument("--roles", action="extend", nargs="+", default=None, metavar="R",
                     help="the roles a line without an outcome is asked as (default: policies.default_role)")

    exp = add_command(
        esub, "export", _cmd_eval_export, help="write a suite as a JSONL gold set",
        description="Write a suite's cases as a JSONL gold set (one case a line), to a file or to standard "
                    "output; the suite itself is not touched.")
    exp.add_argument("suite", metavar="PATH", help="the suite file to export")
    exp.add_argument("--jsonl", required=True, metavar="FILE", help="the JSONL file to write ('-': standard output)")

    seed = add_command(
        esub, "seed", _cmd_eval_seed, help="draft unreviewed cases from a datasource's schema (calls a paid model)",
        description="Ask the configured model for questions over a datasource's schema and append the ones "
                    "whose SQL runs and passes the policy as drafts to --out, for a person to review. Calls a "
                    "paid model (never in CI). Exit 2 on a refusal, 3 at the cost cap or the call limit.")
    seed.add_argument("--datasource", required=True, metavar="ID", help="the datasource to draft questions for")
    seed.add_argument("--out", required=True, metavar="PATH", help="the draft suite to append to")
    seed.add_argument("--count", type=int, default=20, metavar="N", help="how many drafts to ask for")
    seed.add_argument("--role", default=None, metavar="R", help="the role drafts are checked as "
                                                               "(default: policies.default_role)")
    seed.add_argument("--max-cost", type=float, default=None, metavar="USD",
                      help="stop before the spend can pass this many dollars (default: max_cost_usd in evals.yaml)")

def add_publish(esub: Any) -> None:
    pub = add_command(
        esub, "publish", _cmd_eval_publish, help="record reports under benchmarks/ and rebuild the results pages",
        description="Record each eval report as a benchmark record under benchmarks/<mode>/<database>/ (never "
                    "overwriting one) and rebuild docs/benchmarks.md and the README's results block. Exit 2 for "
                    "a report that is unreadable, or incomplete without --allow-incomplete.")
    pub.add_argument("reports", nargs="*", metavar="REPORT", help="eval report files (eval_<mode>.json)")
    pub.add_argument("--note", default=None, help="what changed, stored in each record")
    pub.add_argument("--from", dest="from_dirs", action="append", default=None, metavar="DIR",
                     help="also record every report *.json in DIR (repeatable)")
    pub.add_argument("--root", default=None, metavar="DIR",
                     help="the project folder holding benchmarks/ (default: the current folder)")
    pub.add_argument("--allow-incomplete", action="store_true",
                     help="record a run the provider failed in part (exit 4 of eval run); refused otherwise")


def _cmd_eval_regenerate(args: argparse.Namespace) -> int:
    with load_project(args) as project:
        report = project.evals.regenerate(args.path, allow_packaged=args.allow_packaged)
    print(f"{report.path}: {report.written} result sets written, {len(report.failed)} failed"
          + (f", {report.requoted} scalars quoted so that every YAML reader reads them alike"
             if report.requoted else "")
          + (" (file unchanged)" if report.unchanged else ""))
    for failure in report.failed:
        print(f"  {failure.case_id}: {failure.reason}", file=sys.stderr)
    return 1 if report.failed else 0


def _cmd_eval_import(args: argparse.Namespace) -> int:
    from nl2sql_assets.evaluation.suites.jsonl import ImportContext, import_jsonl
    from nl2sql_assets.project import load_project_config

    config = load_project_config(project_config_path(args))
    roles = args.roles or [config.policies.default_role]
    ctx = ImportContext(roles=roles, database=args.database,
                        datasources={ds.id: ds.path for ds in config.datasources})
    report = import_jsonl(args.file, args.out, ctx, config=config)
    print(f"{report.path}: {report.cases} case(s) imported, {report.drafts} of them drafts")
    if report.pending:
        print(f"  {len(report.pending)} case(s) hold fields not run yet (a semantic model) "
              f"and stay drafts: {', '.join(report.pending[:10])}"
              + (" ..." if len(report.pending) > 10 else ""))
    return EXIT_OK


def _cmd_eval_export(args: argparse.Namespace) -> int:
    from nl2sql_assets.evaluation.suites.jsonl import export_jsonl

    if args.jsonl == "-":
        sys.stdout.write(export_jsonl(args.suite))
        return EXIT_OK
    text = export_jsonl(args.suite, args.jsonl)
    print(f"{args.jsonl}: {text.count(chr(10))} case(s) written")
    return EXIT_OK


def _cmd_eval_seed(args: argparse.Namespace) -> int:
    if "CI" in os.environ:  # before loading anything: seeding spends money
        raise UsageError("eval seed calls a paid model and never runs in CI (the CI variable is set)")
    with load_project(args) as project:
        report = project.evals.seed(args.datasource, count=args.count, out=args.out, role=args.role,
                                    max_cost_usd=args.max_cost)
    print(f"{report.path}: {report.drafted} draft(s) added ({', '.join(report.case_ids) or 'none'}), "
          f"{len(report.dropped)} dropped; {report.calls} call(s), spent ${report.spent:.4f}")
    for dropped in report.dropped:
        print(f"  dropped {dropped.question!r}: {dropped.reason}", file=sys.stderr)
    for failure in report.failed_calls:
        print(f"  failed call: {failure}", file=sys.stderr)
    if report.stopped == "max_cost":
        print(f"stopped at the cost cap: spent ${report.spent:.4f}", file=sys.stderr)
        return EXIT_COST_CAP
    if report.stopped == "call_limit":
        print(f"stopped at the call limit ({report.calls} calls) with {report.drafted} of {args.count} drafts",
              file=sys.stderr)
        return EXIT_COST_CAP
    return EXIT_OK


def _cmd_eval_publish(args: argparse.Namespace) -> int:
    from nl2sql_assets.evaluation.history.publish import publish

    root = Path(args.root) if args.root else Path.cwd()
    result = publish([Path(r) for r in args.reports], note=args.note,
                     from_dirs=[Path(d) for d in args.from_dirs or []], root=root,
                     allow_incomplete=args.allow_incomplete)
    for path in result.records:
        print(f"recorded {path}")
    for path in result.written:
        print(f"updated {path}" + (" (its results block)" if path == result.readme else ""))
    for path in result.unchanged:
        print(f"unchanged {path}")
    return 0
