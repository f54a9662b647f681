"""``eval grade`` (a predictions file against a suite, no engine) and ``eval audit`` (the gold audit)."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

from nl2sql_assets.cli.common import (
    EXIT_OK,
    add_command,
    add_neighbour_options,
    grade_neighbours,
    neighbour_settings,
    project_config_path,
)


def add(esub: Any) -> None:
    grade = add_command(esub, "grade", cmd_grade, help="score a predictions file against a suite, no engine involved",
                            description="Run each predicted SQL read-only and compare it with the case's gold "
                                        "rows (strict and lenient execution match), on every core; on the "
                                        "neighbour databases too where evals.yaml's neighbours: or a flag asks, "
                                        "each pass that holds there searched for a witness. Prints the rates "
                                        "with their intervals; --out writes the report. Exit 0 graded, 2 on "
                                        "bad input.")
    grade.add_argument("predictions", metavar="PREDICTIONS",
                       help="a JSON object (case id -> SQL) or Spider's text format (one SQL per line in case "
                            "order, optionally a tab and the db id)")
    grade.add_argument("--suite", required=True, metavar="PATH", help="the suite whose cases are predicted")
    grade.add_argument("--workers", type=int, default=None, metavar="N", help="worker processes (default: cores)")
    grade.add_argument("--out", default=None, metavar="FILE", help="write the full report (JSON) here")
    add_neighbour_options(grade, "grade", off=True)

    audit = add_command(esub, "audit", cmd_audit, help="flag gold SQL that tests less than it seems (ties, empty, slow, "
                                          "data-blind, disagreeing alternatives)",
                            description="The gold audit of a suite, on the original database and its kept "
                                        "neighbour databases (built once under warehouse/neighbours/, as eval "
                                        "grade --neighbours keeps them): each case's gold is flagged when its "
                                        "result leans on the rows' physical order, is empty, is far slower than "
                                        "the suite's median or times out, is the same on every database, or a "
                                        "reviewed alternative disagrees with it on a neighbour.",
                            epilog="exit codes: 0 audited (flags or not); 1 with --strict, a flag was raised; "
                                   "2 usage error")
    audit.add_argument("suite", metavar="SUITE", help="the suite file to audit")
    audit.add_argument("--out", default=None, metavar="FILE", help="write the audit (JSON) here")
    audit.add_argument("--strict", action="store_true", help="exit 1 when any flag is raised")
    add_neighbour_options(audit, "audit", witness=False)


def cmd_grade(args: argparse.Namespace) -> int:
    config_path = project_config_path(args)
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
    settings = grade_neighbours(args, config)
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


def cmd_audit(args: argparse.Namespace) -> int:
    config_path = project_config_path(args)
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
